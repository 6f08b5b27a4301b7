"""Which rows a user may see at all — the rule the querysets apply (``for_user``), below
the permission rules that build on it (:mod:`deuz_django.permissions`)."""

from __future__ import annotations

from typing import Any, Protocol, TypeGuard

from django.db.models import QuerySet

VIEW_ANY_RUN = "deuz_django.view_run"


class Person(Protocol):
    """Whoever acts on a run — a user of the project's user model, or Django's
    ``AnonymousUser`` — as far as the permission rules look at them."""

    @property
    def pk(self) -> Any: ...
    @property
    def is_authenticated(self) -> bool: ...
    @property
    def is_active(self) -> bool: ...
    def has_perm(self, perm: str, obj: Any = None) -> bool: ...
    def get_username(self) -> str: ...


def is_signed_in(user: Person | None) -> TypeGuard[Person]:
    """An authenticated, active user (anonymous and deactivated users may do nothing)."""
    return (
        user is not None
        and bool(getattr(user, "is_authenticated", False))
        and bool(getattr(user, "is_active", False))
    )


def visible_runs[Runs: QuerySet[Any]](queryset: Runs, user: Person | None) -> Runs:
    """The runs of ``queryset`` that ``user`` may see: their own, or all of them with
    ``deuz_django.view_run``."""
    if not is_signed_in(user):
        return queryset.none()
    if user.has_perm(VIEW_ANY_RUN):
        return queryset
    return queryset.filter(owner=user)
