"""Questions for a person on approval rows: what a ``question`` row asks, whether an
answer answers it, and the answer a recorded verdict keeps.

A question tool's call (:mod:`deuz_django.core.questions`) suspends the run like a gated
call; its row, of kind ``question``, keeps the question it asks. It is answered by an
approving verdict that carries the ``answer`` — through the same check and write as every
verdict (:mod:`deuz_django.approvals.verdicts`): the same permissions, token, deadline and audit
trail; the person who answered is ``decided_by``. Denying a question declines to answer
it (the model is told the reason). Standing rules and grants never answer a question
(:mod:`deuz_django.rules.automatic` decides rows of kind ``approval`` only).
"""

from __future__ import annotations

import json
from typing import Any

from ..core.exceptions import InvalidInputError
from ..core.questions import Question
from ..models import Approval, ApprovalKind, ApprovalStatus


def question_of(approval: Approval) -> Question | None:
    """The question a row asks (``None``: it is no question, or its stored question
    cannot be read)."""
    if approval.kind != ApprovalKind.QUESTION or approval.question is None:
        return None
    try:
        return Question.from_json(approval.question)
    except InvalidInputError:
        return None


def answer_problem(approval: Approval, approved: bool, answer: Any) -> str | None:
    """Why a verdict (``approved``, with ``answer`` or ``None``) may not be recorded on
    ``approval`` as far as answers go: only an approving verdict on a question carries an
    answer, and it must answer the question (the problem names the field that failed).
    A client tool's call is approved with its result (any JSON value) as the answer."""
    if approval.kind == ApprovalKind.CLIENT_TOOL:
        if approved and answer is None:
            return "answer: give the client tool's result"
        if not approved and answer is not None:
            return "a denied call carries no result"
        return None
    if approval.kind != ApprovalKind.QUESTION:
        if answer is None:
            return None
        return "only a question is answered; this call asks none"
    if not approved:
        return None if answer is None else "a declined question carries no answer"
    question = question_of(approval)
    if question is None:
        return "the question of this call cannot be read"
    if answer is None:
        return "answer: give the answer to the question"
    return question.problem(answer)


def read_answer(approval: Approval, text: str) -> Any:
    """The answer a form's text gives ``approval``'s question (``None`` for no text):
    the text itself, or — for a question with a JSON schema, and for a client tool's
    result — the JSON it holds; raises :class:`ValueError` saying so when that is not
    JSON. Whether it answers the question is the verdict's check (:func:`answer_problem`)."""
    if not text:
        return None
    question = question_of(approval)
    as_text = question is not None and question.schema is None
    if as_text or approval.kind not in (
        ApprovalKind.QUESTION,
        ApprovalKind.CLIENT_TOOL,
    ):
        return text
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError("Answer: enter it as JSON (text in double quotes).") from None


def recorded_answer(approval: Approval, status: str, answer: Any) -> Any:
    """The answer a recorded verdict keeps on the row: an approved question's, or an
    approved client tool call's result."""
    answers = (ApprovalKind.QUESTION, ApprovalKind.CLIENT_TOOL)
    if approval.kind in answers and status == ApprovalStatus.APPROVED:
        return answer
    return None
