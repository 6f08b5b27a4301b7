"""What a tool was when a call was asked, and what a deploy changed since.

A suspended run can wait hours for a verdict, and a deploy in between may change the
tool the pending call names: its input schema, whether it needs approval, who may
approve it. The approval row keeps the tool's :func:`definition` as it was asked
(``Approval.tool_definition``); the approver is shown :func:`changes` against the tool
as deployed now, and an approving verdict records the digest of the definition it was
given on (``Approval.decided_on_definition``). The next leg runs the call only while the
deployed tool still has that digest: a verdict given on an older definition never runs
a newer one silently (:mod:`deuz_django.approvals.settling` denies the call, saying why).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..core import Tool
from ..core.exceptions import DeuzError
from ..models import Approval
from ..permissions import approval_tool

REMOVED = "the tool is no longer defined"


def definition(tool: Tool | None) -> dict[str, Any] | None:
    """The parts of ``tool`` an approver decides on: its name, description and input
    schema, and its approval settings (``None``: no such tool)."""
    if tool is None:
        return None
    needs = tool.needs_approval
    return {
        "name": tool.name,
        "description": tool.description or "",
        "inputSchema": tool.parameters,
        "needsApproval": needs if isinstance(needs, bool) else "predicate",
        "approvalPermission": tool.approval_permission or "",
        "approvalByOwner": tool.approval_by_owner,
        "editable": tool.editable,
        "idempotent": tool.idempotent,
        "asksQuestion": tool.question is not None,
        "runsOnServer": tool.execute is not None,
    }


def digest(described: Mapping[str, Any] | None) -> str:
    """The SHA-256 of a :func:`definition` as canonical JSON (``""`` for no tool)."""
    if described is None:
        return ""
    canonical = json.dumps(described, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def fingerprint(tools: Mapping[str, Tool]) -> str:
    """One digest of an agent's whole tool set, sub-agents' tools included (what the run
    row records when it suspends)."""
    return digest({name: _described_tree(tool) for name, tool in sorted(tools.items())})


def _described_tree(tool: Tool) -> dict[str, Any]:
    described = definition(tool) or {}
    if tool.sub_tools:
        described["subTools"] = {
            name: _described_tree(sub) for name, sub in sorted(tool.sub_tools.items())
        }
    return described


def changes(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> list[str]:
    """What changed from ``before`` to ``after``, one line per changed setting or schema
    path (``[]``: nothing did)."""
    if before is None and after is None:
        return []
    if after is None:
        return [REMOVED]
    if before is None:
        return ["the tool was not defined when the call was asked"]
    lines: list[str] = []
    _diff(dict(before), dict(after), "", lines)
    return lines


def _diff(before: Any, after: Any, path: str, lines: list[str]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            inner = f"{path}.{key}" if path else key
            if key not in after:
                lines.append(f"{inner}: removed (was {_shown(before[key])})")
            elif key not in before:
                lines.append(f"{inner}: added ({_shown(after[key])})")
            else:
                _diff(before[key], after[key], inner, lines)
    elif before != after:
        lines.append(f"{path}: {_shown(before)} → {_shown(after)}")


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def current_definition(approval: Approval) -> dict[str, Any] | None:
    """The definition of the approval's tool as deployed now (``None``: the agent has
    no such tool any more); raises the agent's error when it cannot be built now."""
    return definition(approval_tool(approval))


def definition_changes(approval: Approval) -> list[str]:
    """What a deploy changed in the approval's tool since the call was asked, for the
    approver (``[]``: nothing, or the row predates definitions, or the tool cannot be
    read now — its deciding is refused then anyway)."""
    if approval.tool_definition is None:
        return []
    try:
        now = current_definition(approval)
    except DeuzError:
        return []
    return changes(approval.tool_definition, now)


def definition_changed_since_verdict(approval: Approval) -> str | None:
    """Why an approved call may not run on the tool as deployed now: a verdict runs the
    definition it was given on, never a changed one (``None``: it may run)."""
    if not approval.decided_on_definition:
        return None  # decided before definitions were recorded
    tool = approval.tool_name
    try:
        now = digest(current_definition(approval))
    except DeuzError as error:
        return f"The {tool} tool cannot be read now ({error}); the call was not run."
    if now == approval.decided_on_definition:
        return None
    return (
        f"The {tool} tool changed after this call was approved (a deploy), so the "
        "call was not run: a verdict given on one definition of a tool never runs "
        "another. Ask for it again if it is still wanted."
    )


def definition_digest_now(approval: Approval) -> str:
    """The digest of the tool definition a verdict is given on now (``""`` when the
    tool cannot be read — its approving is refused before this for a person)."""
    try:
        return digest(current_definition(approval))
    except DeuzError:
        return ""
