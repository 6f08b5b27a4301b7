"""Transitional: ``deuz_django.verdicts`` still imports ``token_authorizes`` from here.

It is :func:`~deuz_django.core.durable.token_problem` answering yes or no; this module goes
once the Django side calls that public check itself.
"""

from __future__ import annotations

from .approvals import ApprovalSignerLike, ToolApprovalResponse
from .durable.signer import token_problem
from .tools import ToolCall


def token_authorizes(
    response: ToolApprovalResponse,
    call: ToolCall,
    signer: ApprovalSignerLike,
    max_age_ms: float | None,
    bound_run_id: str | None,
) -> bool:
    return (
        token_problem(
            response.token,
            call,
            signer=signer,
            run_id=bound_run_id,
            max_age_ms=max_age_ms,
        )
        is None
    )
