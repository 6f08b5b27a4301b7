"""Who is mailed about a waiting call: exactly the people who may decide it — a matrix of
users against the gated agent's two calls (deuz_django.notifications.recipients)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User

from deuz_django.notifications.recipients import deciders
from tests.django.agents import TOOL_PERMISSION
from tests.django.run_support import approval, suspended

pytestmark = pytest.mark.django_db

DECIDER = ("deuz_django.view_run", "deuz_django.decide_approval")


@pytest.fixture
def people(make_user: Callable[..., User]) -> dict[str, User]:
    """ann owns the run; the others hold what their names say."""

    def user(name: str, *perms: str, email: bool = True, **fields: Any) -> User:
        made = make_user(name, *perms, superuser=fields.pop("superuser", False))
        made.email = f"{name}@example.com" if email else ""
        for key, value in fields.items():
            setattr(made, key, value)
        made.save()
        return made

    finance = Group.objects.create(name="Finance")
    for perm in (*DECIDER, TOOL_PERMISSION):
        app_label, codename = perm.split(".")
        finance.permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    found = {
        "ann": user("ann"),
        "boss": user("boss", *DECIDER, TOOL_PERMISSION),
        "clerk": user("clerk", *DECIDER),
        "peeker": user("peeker", "deuz_django.view_run"),
        "blind": user("blind", "deuz_django.decide_approval", TOOL_PERMISSION),
        "root": user("root", superuser=True),
        "gone": user("gone", *DECIDER, TOOL_PERMISSION, is_active=False),
        "silent": user("silent", *DECIDER, TOOL_PERMISSION, email=False),
        "grouped": user("grouped"),
        "stranger": user("stranger"),
    }
    found["grouped"].groups.add(finance)
    return found


def names(users: list[Any]) -> list[str]:
    return sorted(u.username for u in users)


def test_a_call_any_decider_may_approve_goes_to_the_owner_and_every_decider(
    people: dict[str, User],
) -> None:
    run = suspended(owner=people["ann"])
    assert names(deciders(approval(run, "send_email"))) == [
        "ann",
        "boss",
        "clerk",
        "grouped",
        "root",
    ]


def test_a_call_that_needs_a_permission_goes_only_to_its_holders_never_the_owner(
    people: dict[str, User],
) -> None:
    # refund: approval_permission=auth.view_group, approval_by_owner=False
    run = suspended(owner=people["ann"])
    assert names(deciders(approval(run, "refund"))) == ["boss", "grouped", "root"]


def test_a_run_without_an_owner_goes_to_the_deciders(people: dict[str, User]) -> None:
    run = suspended()
    assert names(deciders(approval(run, "send_email"))) == [
        "boss",
        "clerk",
        "grouped",
        "root",
    ]


@pytest.mark.parametrize(
    ("to", "expected"),
    [
        (f"perm:{TOOL_PERMISSION}", ["boss", "grouped", "root"]),
        ("group:Finance", ["grouped"]),
        ("group:Nobody", []),
        # clerk and peeker see the run, but may not approve a refund
        ("perm:deuz_django.view_run", ["boss", "grouped", "root"]),
    ],
)
def test_an_escalation_goes_to_the_people_it_names_who_may_decide(
    people: dict[str, User], to: str, expected: list[str]
) -> None:
    run = suspended(owner=people["ann"])
    assert names(deciders(approval(run, "refund"), to=to)) == expected


@pytest.mark.parametrize("to", ["nobody", "perm:", "perm:no_dot", "group:", "user:ann"])
def test_an_escalation_naming_nobody_is_an_error_naming_the_form(
    people: dict[str, User], to: str
) -> None:
    run = suspended(owner=people["ann"])
    with pytest.raises(ValueError, match=r"'perm:<app_label\.codename>'"):
        deciders(approval(run, "refund"), to=to)
