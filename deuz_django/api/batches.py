"""A batch of verdicts from an untrusted client, checked whole before any is recorded.

The checks run in this order, each over every verdict, and the first that finds problems
answers for the batch, naming each failing verdict by index and approval id: the shape
(SPEC R12.1, 400), unknown or repeated approval ids (400), permission per approval (403),
approvals decided already (409), and the signer check of approving tokens (400). An
approval too old to decide is recorded ``expired``, as on every surface.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError

from ..approvals.verdicts import RecordedResult, Verdict
from ..core.exceptions import Problem
from ..exceptions import (
    ApprovalAlreadyDecided,
    ApprovalNotFound,
    InvalidVerdict,
    NotPermitted,
)
from ..models import Approval, Run
from ..models.visibility import Person
from ..rules.grants import Allow
from ..services import verdict_refusals
from .exceptions import (
    Conflict,
    DeuzAPIException,
    ErrorItem,
    InvalidRequest,
    InvalidVerdicts,
    VerdictsForbidden,
    error_item,
    field_problems,
)
from .serializers import VerdictBatchSerializer, check_text


def read_batch(data: Any) -> dict[str, Any]:
    """``{"verdicts": [...], "resume": bool}``, or just the list of verdicts."""
    if isinstance(data, list):
        data = {"verdicts": data}
    if not isinstance(data, dict):
        raise InvalidRequest(
            "The body must be an object with verdicts, or a list of verdicts.",
            errors=[{"field": "body", "message": "expected an object or a list"}],
        )
    serializer = VerdictBatchSerializer(data=data)
    if serializer.is_valid():
        return dict(serializer.validated_data)
    raw = data.get("verdicts")
    errors = []
    for problem in field_problems(serializer.errors):
        match problem.path:
            case ("verdicts", int(index), *rest) if isinstance(raw, list):
                inner = Problem(tuple(rest), problem.message)
                errors.append(
                    _item(index, raw[index], inner.field or "verdict", problem.message)
                )
            case _:
                errors.append(error_item(problem))
    raise InvalidVerdicts(_summary(errors), code="invalid", errors=errors)


def read_verdict(fields: dict[str, Any]) -> Verdict:
    """One verdict as :class:`~.serializers.VerdictSerializer` validated it (the REST
    batch's items and the WebSocket's ``approval-response`` frames alike)."""
    allow = fields.get("allow")
    return Verdict(
        fields["approved"],
        fields.get("reason", ""),
        fields.get("token", ""),
        RecordedResult(fields["result"]) if "result" in fields else None,
        fields.get("editedInput"),
        None if allow is None else Allow(allow["scope"], allow.get("hours")),
        fields.get("answer"),
    )


def check_batch(
    user: Person | None, run: Run, verdicts: list[dict[str, Any]]
) -> list[tuple[Approval, Verdict]]:
    """Each approval with its verdict, once the verdict service accepted every one
    (:func:`deuz_django.services.verdict_refusals`).

    The refusals of the most serious kind answer for the batch: permission (403), then
    approvals decided already (409), then tokens (400). A verdict on an approval too old
    to decide is not refused: it is recorded ``expired``, as on every surface.
    """
    checked = [
        (a, read_verdict(v))
        for v, a in zip(verdicts, _approvals(run, verdicts), strict=True)
    ]
    refusals = [
        (index, verdicts[index], refusal)
        for index, refusal in verdict_refusals(user, checked)
    ]
    for refused, error_class, code in _KINDS:
        errors = [
            _item(index, verdict, refusal.field, refusal.problem)
            for index, verdict, refusal in refusals
            if isinstance(refusal.error, refused)
        ]
        if errors:
            raise error_class(_summary(errors), code=code, errors=errors)
    return checked


# Refusals by kind, most serious first, with the API error each kind answers with.
_KINDS: tuple[tuple[type[Exception], type[DeuzAPIException], str | None], ...] = (
    (NotPermitted, VerdictsForbidden, None),
    (ApprovalNotFound, InvalidVerdicts, None),
    (ApprovalAlreadyDecided, Conflict, "approval_already_decided"),
    (InvalidVerdict, InvalidVerdicts, None),
)


def _approvals(run: Run, verdicts: list[dict[str, Any]]) -> list[Approval]:
    ids = [v["approvalId"] for v in verdicts]
    rows: dict[str, Approval] = {}
    for a in (
        run.approvals.filter(approval_id__in=ids).select_related("run").newest_first()
    ):
        rows.setdefault(a.approval_id, a)  # a call id addresses its latest ask
    errors, seen = [], set()
    for index, verdict in enumerate(verdicts):
        approval_id = verdict["approvalId"]
        if approval_id in seen:
            problem = "appears more than once in this request"
        elif approval_id not in rows:
            problem = "no approval with this id on this run"
        else:
            problem = None
        if problem:
            errors.append(_item(index, verdict, "approvalId", problem))
        seen.add(approval_id)
    if errors:
        raise InvalidVerdicts(_summary(errors), errors=errors)
    return [rows[approval_id] for approval_id in ids]


def _item(index: int, verdict: Any, field: str, message: str) -> ErrorItem:
    item: ErrorItem = {"index": index}
    approval_id = verdict.get("approvalId") if isinstance(verdict, dict) else None
    if isinstance(approval_id, str) and _echoable(approval_id):
        item["approvalId"] = approval_id
    return {**item, "field": field, "message": message}


def _echoable(text: str) -> bool:
    """Whether a client's id may be named in the answer (never NUL or lone surrogates)."""
    try:
        check_text(text)
    except ValidationError:
        return False
    return True


def _summary(errors: list[ErrorItem]) -> str:
    """``Verdict 1 (r1), token: the token was minted for another run. Nothing was ...``"""
    first = errors[0]
    where = f"Verdict {first['index']}" if "index" in first else ""
    if "approvalId" in first:
        where += f" ({first['approvalId']})"
    where = f"{where}, {first['field']}" if where else first["field"]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['message'].rstrip('.')}{more}. Nothing was recorded."
