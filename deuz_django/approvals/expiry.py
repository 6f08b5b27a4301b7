"""How long an approval stays decidable: ``DEUZ["APPROVAL_MAX_AGE"]``, as every surface,
the claim and the resume-time settle read it."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from ..conf import deuz_settings
from ..models import Approval

EXPIRED_REASON = "Approval expired."


def max_age() -> timedelta | None:
    """``DEUZ["APPROVAL_MAX_AGE"]``: how long an approval and its token stay decidable."""
    seconds = deuz_settings.APPROVAL_MAX_AGE
    return None if seconds is None else timedelta(seconds=float(seconds))


def expiry_cutoff(now: datetime | None = None) -> datetime | None:
    """Approvals created before this moment are too old to decide (``None``: no expiry)."""
    age = max_age()
    return None if age is None else (now or timezone.now()) - age


def is_expired(approval: Approval, now: datetime | None = None) -> bool:
    cutoff = expiry_cutoff(now)
    return cutoff is not None and approval.created_at <= cutoff
