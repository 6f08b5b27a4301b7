"""Which rows a user may see at all — the rule the querysets apply (``for_user``), below
the permission rules that build on it (:mod:`deuz_django.permissions`)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

VIEW_ANY_RUN = "deuz_django.view_run"


def is_signed_in(user: Any) -> bool:
    """An authenticated, active user (anonymous and deactivated users may do nothing)."""
    return (
        user is not None
        and bool(getattr(user, "is_authenticated", False))
        and bool(getattr(user, "is_active", False))
    )


def visible_runs[Runs: QuerySet[Any]](queryset: Runs, user: Any) -> Runs:
    """The runs of ``queryset`` that ``user`` may see: their own, or all of them with
    ``deuz_django.view_run``."""
    if not is_signed_in(user):
        return queryset.none()
    if user.has_perm(VIEW_ANY_RUN):
        return queryset
    return queryset.filter(owner=user)
