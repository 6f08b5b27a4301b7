"""Edit, then approve, in the admin: a JSON editor beside an editable call, a confirmation
page showing the difference, the edit recorded with the verdict and shown in the decision
history and on the approval's page; bad edits are refused with nothing recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from deuz_django.models import Approval, ApprovalStatus, Run
from deuz_django.runs.continuing import join_handed_off
from tests.django.admin_support import (
    DECIDER,
    approval,
    decide_url,
    messages_of,
    run_url,
)
from tests.django.run_support import background_leg, suspended

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]
EDITOR = (*DECIDER, "deuz_django.edit_approval_input")
EDITED = '{"to": "ann", "amount": 20}'


@pytest.fixture
def run(make_user: MakeUser) -> Run:
    """A ``payer`` run of ann's: ``pay`` (p1, editable) and an email (e1) wait."""
    return suspended("payer", owner=make_user("ann"))


@pytest.fixture
def fin(client: Client, make_user: MakeUser) -> User:
    user = make_user("fin", *EDITOR, staff=True)
    client.force_login(user)
    return user


def post(client: Client, target: Approval, **fields: str) -> Any:
    return client.post(
        decide_url(target), {"verdict": "approve", **fields}, follow=True
    )


def test_the_editor_is_offered_for_an_editable_call_to_who_may_edit(
    client: Client, run: Run, fin: User, make_user: MakeUser
) -> None:
    html = client.get(run_url(run)).content.decode()
    assert html.count('name="edited_input"') == 1  # pay, not send_email
    assert "Edit the input, then approve" in html
    page = client.get(
        reverse("admin:deuz_django_approval_change", args=[approval(run, "pay").pk])
    )
    assert 'name="edited_input"' in page.content.decode()

    client.force_login(make_user("clerk", *DECIDER, staff=True))
    assert 'name="edited_input"' not in client.get(run_url(run)).content.decode()


@background_leg
def test_an_edit_is_confirmed_with_its_difference_then_recorded_and_run(
    client: Client, run: Run, fin: User, effects: Callable[[], list[str]]
) -> None:
    pay = approval(run, "pay")

    page = client.post(decide_url(pay), {"verdict": "approve", "edited_input": EDITED})

    html = page.content.decode()
    assert "The call runs with an edited input" in html
    assert "<del>50" in html
    assert "<ins>20</ins>" in html
    assert 'name="edited_input" value="{&quot;to&quot;: &quot;ann&quot;' in html
    assert approval(run, "pay").is_pending

    done = post(client, pay, edited_input=EDITED, post="yes")
    assert messages_of(done) == [f"Approved pay (p1) on run {run.run_id}."]
    row = approval(run, "pay")
    assert (row.status, row.edited_input, row.decided_by) == (
        ApprovalStatus.APPROVED,
        {"to": "ann", "amount": 20},
        fin,
    )
    post(client, approval(run, "send_email"), post="yes")
    join_handed_off()
    assert "pay:ann:20.0" in effects()

    history = client.get(run_url(run)).content.decode()
    assert '<span class="deuz-badge deuz-badge--edited">edited</span>' in history
    assert "<del>50" in history
    page = client.get(reverse("admin:deuz_django_approval_change", args=[row.pk]))
    assert "<ins>20</ins>" in page.content.decode()


def test_an_unchanged_input_in_the_editor_is_a_plain_approval(
    client: Client, run: Run, fin: User
) -> None:
    post(
        client,
        approval(run, "pay"),
        edited_input='{"to": "ann", "amount": 50.0}',
        post="yes",
    )
    row = approval(run, "pay")
    assert (row.status, row.edited_input) == (ApprovalStatus.APPROVED, None)


@pytest.mark.parametrize(
    ("tool", "text", "message"),
    [
        (
            "pay",
            "{not json",
            "Nothing was recorded: Edited input (JSON): Enter a valid JSON.",
        ),
        (
            "pay",
            "[1, 2]",
            "Nothing was recorded: Edited input (JSON): Give the call's input as a JSON object.",
        ),
        (
            "pay",
            '{"to": "ann", "amount": "lots"}',
            "pay (p1) on run {run} was not approved: Approval p1: editedInput.amount: "
            "Input should be a valid number, unable to parse string as a number.",
        ),
        (
            "pay",
            '{"to": "ann", "amount": 5, "tool": "send_email"}',
            "pay (p1) on run {run} was not approved: Approval p1: editedInput.tool: "
            "Extra inputs are not permitted.",
        ),
        (
            "send_email",
            '{"to": "bob@example.com"}',
            "send_email (e1) on run {run} was not approved: Approval e1: the input of "
            "send_email calls may not be edited.",
        ),
    ],
)
def test_a_bad_edit_is_refused_with_a_clear_message_and_nothing_is_recorded(
    client: Client, run: Run, fin: User, tool: str, text: str, message: str
) -> None:
    response = post(client, approval(run, tool), edited_input=text, post="yes")

    assert messages_of(response) == [message.format(run=run.run_id)]
    row = approval(run, tool)
    assert (row.status, row.edited_input) == (ApprovalStatus.PENDING, None)


def test_a_decider_without_the_edit_permission_is_refused_and_nothing_is_recorded(
    client: Client, run: Run, make_user: MakeUser
) -> None:
    client.force_login(make_user("clerk", *DECIDER, staff=True))

    response = post(client, approval(run, "pay"), edited_input=EDITED, post="yes")

    assert messages_of(response) == [
        f"pay (p1) on run {run.run_id}: Editing a call's input needs the "
        "'deuz_django.edit_approval_input' permission. Nothing was recorded."
    ]
    assert approval(run, "pay").is_pending
