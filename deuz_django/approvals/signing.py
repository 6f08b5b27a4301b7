"""The approval tokens: the signer of ``DEUZ["APPROVAL_SECRET"]``, and the one check that a
token authorizes exactly one approval's call on its run now."""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured

from ..conf import deuz_settings
from ..core.durable import ApprovalSigner, create_approval_signer, token_problem
from ..core.tools import ToolCall
from ..models import Approval
from .expiry import max_age


def approval_signer() -> ApprovalSigner:
    """The signer for ``DEUZ["APPROVAL_SECRET"]`` (and its fallback secrets)."""
    secret = deuz_settings.APPROVAL_SECRET
    if not secret:
        raise ImproperlyConfigured(
            "DEUZ['APPROVAL_SECRET'] is not set (check deuz_django.E001)."
        )
    return create_approval_signer(
        secret=secret, fallback_secrets=tuple(deuz_settings.APPROVAL_FALLBACK_SECRETS)
    )


def token_refusal(approval: Approval, token: str | None) -> str | None:
    """Why ``token`` does not authorize exactly this approval's call on this run now
    (:func:`deuz_django.core.durable.token_problem`, the check the settle makes too):
    it must verify, be bound to the run, pin the call (id, tool, input) and be younger
    than ``APPROVAL_MAX_AGE``."""
    age = max_age()
    problem = token_problem(
        token,
        ToolCall(approval.tool_call_id, approval.tool_name, approval.input),
        signer=approval_signer(),
        run_id=approval.run.run_id,
        max_age_ms=None if age is None else age / timedelta(milliseconds=1),
    )
    return None if problem is None else problem.message
