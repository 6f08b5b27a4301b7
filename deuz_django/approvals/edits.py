"""Edit, then approve: whether a verdict's edited input may replace a call's input, and
the input a recorded verdict runs the call with (:mod:`.verdicts` checks and writes)."""

from __future__ import annotations

from typing import Any

from ..core.exceptions import DeuzError
from ..models import Approval, ApprovalKind, ApprovalStatus
from ..permissions import approval_tool


def edited_input(
    approval: Approval, edit: dict[str, Any] | None, status: str
) -> dict[str, Any] | None:
    """The input a recorded verdict runs the call with, when not the model's: an
    approving verdict's edit, or — on a call in doubt, which is never edited — the edit
    that ran before the crash (kept, so "run it again" runs it again)."""
    if approval.kind == ApprovalKind.OUTCOME_UNKNOWN:
        return approval.edited_input
    return edit if status == ApprovalStatus.APPROVED else None


def edit_problem(
    approval: Approval, approving: bool, edit: dict[str, Any] | None
) -> str | None:
    """Why ``edit`` may not replace the call's input: only an approving
    verdict on a gated call of an ``editable`` tool edits, and the edited input must pass
    the tool's schema (the problem names the field: ``editedInput.amount: …``)."""
    if not approving:
        return "only an approving verdict may edit the call's input"
    if approval.kind != ApprovalKind.APPROVAL:
        return "a call in doubt is not edited: record its result, or run it again"
    try:
        tool = approval_tool(approval)
    except DeuzError as error:
        return f"the rules for {approval.tool_name} calls cannot be read now: {error}"
    if tool is None:
        return f"the input of {approval.tool_name} calls may not be edited"
    problems = tool.edit_problems(edit)
    if problems and not tool.editable:
        return problems[0]
    return "; ".join(f"editedInput.{problem}" for problem in problems) or None
