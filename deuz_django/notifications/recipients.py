"""Who is told about a call waiting for a person: exactly the people who may decide it.

The candidates are the run's owner and the holders of ``deuz_django.decide_approval``
(superusers included) — or, for an escalation, the people it names (``perm:`` holders of
a permission, ``group:`` members of a group). Each candidate is then asked the one
question :mod:`deuz_django.permissions` answers for every surface, "may they approve this
call?" (:func:`~deuz_django.permissions.decide_refusal`): so a tool's
``approval_permission`` narrows the list, separation of duties leaves out the owner of
an ``approval_by_owner=False`` call, and nobody is told about a call they could not
approve. Only active users with an e-mail address are told.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_backends, get_user_model
from django.db.models import QuerySet

from ..models.visibility import Person
from ..permissions import DECIDE_ANY_APPROVAL, decide_refusal

if TYPE_CHECKING:
    from ..models import Approval


def deciders(approval: Approval, *, to: str = "") -> list[Any]:
    """The users to tell about ``approval`` (``to``: an escalation's people), by pk."""
    candidates: Iterable[Any] = people(to) if to else _usual_candidates(approval)
    email_field = get_user_model().get_email_field_name()
    chosen: dict[Any, Any] = {}
    for user in candidates:
        if user.pk in chosen or not user.is_active:
            continue
        if not getattr(user, email_field, ""):
            continue
        if decide_refusal(user, approval, approving=True) is None:
            chosen[user.pk] = user
    return [chosen[pk] for pk in sorted(chosen)]


def email_of(user: Person | None) -> str:
    return str(getattr(user, get_user_model().get_email_field_name(), ""))


def people(to: str) -> QuerySet[Any]:
    """The active users an escalation's ``to`` names: ``"perm:<app_label.codename>"``
    or ``"group:<name>"``; raises ``ValueError`` for anything else."""
    kind, _, name = to.partition(":")
    if kind == "perm" and name.count(".") == 1:
        return holders(name)
    if kind == "group" and name:
        return get_user_model()._default_manager.filter(
            groups__name=name, is_active=True
        )
    raise ValueError(
        f"to: {to!r} names nobody; use 'perm:<app_label.codename>' or 'group:<name>'."
    )


def holders(perm: str) -> QuerySet[Any]:
    """The active users holding ``perm`` (superusers too), as every authentication
    backend that can list them says (``with_perm``)."""
    found = get_user_model()._default_manager.none()
    for backend in get_backends():
        if hasattr(backend, "with_perm"):
            found = found | backend.with_perm(perm, is_active=True)
    return found


def _usual_candidates(approval: Approval) -> list[Any]:
    owner = approval.run.owner
    return [*([owner] if owner is not None else []), *holders(DECIDE_ANY_APPROVAL)]
