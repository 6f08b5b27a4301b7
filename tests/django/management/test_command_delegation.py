"""``deuz delegation add|list|revoke``: lending approval rights from a shell, with the
same checks as the admin and the REST API, and clear errors for bad arguments."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone

from deuz_django.models import Delegation

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]


def deuz(*args: str) -> str:
    out = io.StringIO()
    call_command("deuz", *args, stdout=out)
    return out.getvalue().strip()


def refused(*args: str) -> CommandError:
    with pytest.raises(CommandError) as caught:
        deuz(*args)
    return caught.value


def test_add_list_and_revoke(make_user: MakeUser) -> None:
    make_user("fin")
    make_user("bob")
    until = (timezone.now() + timedelta(days=5)).date().isoformat()
    said = deuz("delegation", "add", "fin", "bob", "--until", until, "--note", "Away")
    made = Delegation.objects.get()
    assert said.startswith(f"Delegation {made.pk}: fin → bob from ")
    assert (made.note, made.in_force) == ("Away", True)
    listed = deuz("delegation", "list", "--user", "bob")
    assert "fin" in listed
    assert "in force" in listed
    assert deuz("delegation", "revoke", str(made.pk)).endswith("revoked")
    assert deuz("delegation", "revoke", str(made.pk)).endswith("was already revoked")
    assert "fin" not in deuz("delegation", "list")  # only those in force
    assert "revoked" in deuz("delegation", "list", "--all")


def test_bad_arguments_are_named_and_nothing_is_made(make_user: MakeUser) -> None:
    make_user("fin")
    make_user("bob")
    assert "No user 'nobody'" in str(
        refused("delegation", "add", "fin", "nobody", "--until", "2099-01-01")
    )
    assert "yourself" in str(
        refused("delegation", "add", "fin", "fin", "--until", "2099-01-01")
    )
    assert "passed" in str(
        refused("delegation", "add", "fin", "bob", "--until", "2000-01-01")
    )
    error = refused("delegation", "add", "fin", "bob", "--until", "someday")
    assert "not an ISO 8601 date or time" in str(error)
    assert error.returncode == 2
    assert refused("delegation", "revoke", "999").returncode == 1
    assert not Delegation.objects.exists()
