"""``deuz delegation``: lend approval rights from a shell, list delegations, revoke one
— through the functions the admin and the REST API use
(:mod:`deuz_django.approvals.delegated`).

    deuz delegation add FROM_USERNAME TO_USERNAME --until ISO [--from ISO] [--note TEXT]
    deuz delegation list [--user USERNAME] [--all]
    deuz delegation revoke ID
"""

from __future__ import annotations

from argparse import ArgumentTypeError, _SubParsersAction
from datetime import datetime
from typing import Any, Protocol

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, OutputWrapper
from django.db.models import Q
from django.utils import timezone

from ..approvals.delegated import delegate, revoke
from ..models import Delegation
from .output import BAD_ARGUMENTS, RUN_ERROR, table, when

# Who a shell's delegation change is recorded as in the audit trail.
OPERATOR = "deuz delegation (shell)"


def add_delegation(actions: _SubParsersAction[Any]) -> None:
    """``delegation add|list|revoke``."""
    parser = actions.add_parser(
        "delegation", help="Lend approval rights for a period; list or revoke them."
    )
    kinds = parser.add_subparsers(
        dest="delegation_action", metavar="WHAT", required=True
    )
    add = kinds.add_parser(
        "add", help="FROM lends TO their own approval rights until --until."
    )
    add.add_argument("delegator", metavar="FROM_USERNAME")
    add.add_argument("delegate", metavar="TO_USERNAME")
    add.add_argument("--until", type=moment, required=True, metavar="ISO")
    add.add_argument("--from", dest="starts", type=moment, metavar="ISO")
    add.add_argument("--note", default="")
    listing = kinds.add_parser("list", help="Delegations in force (--all: every one).")
    listing.add_argument("--user", metavar="USERNAME", help="Given or received by.")
    listing.add_argument("--all", action="store_true", help="Ended and revoked too.")
    revoking = kinds.add_parser("revoke", help="Revoke a delegation now.")
    revoking.add_argument("delegation_id", type=int, metavar="ID")


def moment(text: str) -> datetime:
    """An ISO 8601 date or time; without a zone, in the project's time zone."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ArgumentTypeError(f"not an ISO 8601 date or time: {text!r}") from None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)


class _Command(Protocol):
    stdout: OutputWrapper


class DelegationAction:
    """The ``delegation`` action of the ``deuz`` command."""

    def handle_delegation(self: _Command, **options: Any) -> None:
        what = options["delegation_action"]
        if what == "add":
            made = _add(options)
            self.stdout.write(
                f"Delegation {made.pk}: {made} from {when(made.starts_at)} until "
                f"{when(made.ends_at)}"
            )
        elif what == "list":
            self.stdout.write(_listing(options))
        else:
            found = Delegation.objects.filter(pk=options["delegation_id"]).first()
            if found is None:
                raise CommandError(
                    f"No delegation with id {options['delegation_id']}.",
                    returncode=RUN_ERROR,
                )
            done = revoke(found, operator=OPERATOR)
            state = "revoked" if done else "was already revoked"
            self.stdout.write(f"Delegation {found.pk} ({found}) {state}")


def _user(username: str) -> Any:
    model = get_user_model()
    user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
    if user is None:
        raise CommandError(f"No user {username!r}.", returncode=BAD_ARGUMENTS)
    return user


def _add(options: dict[str, Any]) -> Delegation:
    try:
        return delegate(
            _user(options["delegator"]),
            _user(options["delegate"]),
            ends_at=options["until"],
            starts_at=options["starts"],
            note=options["note"],
            operator=OPERATOR,
        )
    except ValueError as error:
        raise CommandError(str(error), returncode=BAD_ARGUMENTS) from None


def _listing(options: dict[str, Any]) -> str:
    rows = Delegation.objects.select_related("delegator", "delegate")
    if not options["all"]:
        rows = rows.active()
    if options["user"]:
        user = _user(options["user"])
        rows = rows.filter(Q(delegator=user) | Q(delegate=user))
    return table(
        [
            [
                str(d.pk),
                d.delegator.get_username(),
                d.delegate.get_username(),
                when(d.starts_at),
                when(d.ends_at),
                "in force" if d.in_force else "revoked" if d.revoked_at else "ended",
                d.note,
            ]
            for d in rows
        ],
        ["ID", "FROM", "TO", "STARTS", "ENDS", "STATE", "NOTE"],
    )
