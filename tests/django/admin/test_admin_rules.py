"""Standing rules and grants in the admin: rules made with the condition in its text form
(a malformed one is a form error naming the clause, nothing saved), listed with their
state and switched off; grants made by "Approve and allow …" on a pending call, listed
and revoked; the run page names the rule or grant behind every automatic decision."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from deuz_django.models import Approval, ApprovalStatus, Grant, Run, StandingRule
from tests.django.admin_support import (
    APPROVER,
    DECIDER,
    approval,
    decide_url,
    messages_of,
    run_url,
)
from tests.django.run_support import suspended

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]
RULES = reverse("admin:deuz_django_standingrule_changelist")
ADD_RULE = reverse("admin:deuz_django_standingrule_add")
GRANTS = reverse("admin:deuz_django_grant_changelist")
RULE_KEEPER = (
    *APPROVER,
    "deuz_django.add_standingrule",
    "deuz_django.change_standingrule",
    "deuz_django.view_standingrule",
    "deuz_django.view_grant",
    "deuz_django.change_grant",
)


@pytest.fixture
def fin(client: Client, make_user: MakeUser) -> User:
    user = make_user("fin", *RULE_KEEPER, staff=True)
    client.force_login(user)
    return user


def rule_form(**fields: Any) -> dict[str, Any]:
    return {
        "tool_name": "refund",
        "agent": "",
        "condition": "amount <= 20",
        "action": "approve",
        "reason": "Small refunds are routine.",
        "expires_at_0": "",
        "expires_at_1": "",
        "active": "on",
        **fields,
    }


def test_a_rule_is_made_with_the_condition_in_its_text_form(
    client: Client, fin: User
) -> None:
    response = client.post(
        ADD_RULE, rule_form(condition='amount <= 20 and order_id in ["A-1", "A-2"]')
    )

    assert response.status_code == 302, response.context["errors"]
    made = StandingRule.objects.get()
    assert made.condition == [
        {"field": "amount", "op": "<=", "value": 20},
        {"field": "order_id", "op": "in", "value": ["A-1", "A-2"]},
    ]
    assert made.created_by == fin
    page = client.get(reverse("admin:deuz_django_standingrule_change", args=[made.pk]))
    assert "amount &lt;= 20 and order_id in [&quot;A-1&quot;, &quot;A-2&quot;]" in (
        page.content.decode()
    )


def test_the_condition_may_be_given_as_json(client: Client, fin: User) -> None:
    data = '[{"field": "amount", "op": "<", "value": 5}]'

    client.post(ADD_RULE, rule_form(condition=data))

    assert StandingRule.objects.get().condition == [
        {"field": "amount", "op": "<", "value": 5}
    ]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"condition": "amount <= 20 and amount <= 'x'"},
            "Clause 2 (amount &lt;= …): expected a JSON value",
        ),
        ({"condition": "amount => 20"}, "Clause 1 (amount …): expected an operator"),
        ({"condition": '[{"field": "amount"}]'}, "Clause 1: a clause is an object"),
        ({"condition": "[1,"}, "Not valid JSON"),
        ({"tool_name": "refnud"}, "No registered agent has a tool &#x27;refnud&#x27;"),
        ({"agent": "payer"}, "Agent &#x27;payer&#x27; has no tool &#x27;refund&#x27;"),
        ({"reason": ""}, "This field is required."),
    ],
)
def test_a_malformed_rule_is_refused_naming_the_problem_and_nothing_is_saved(
    client: Client, fin: User, fields: dict[str, str], error: str
) -> None:
    response = client.post(ADD_RULE, rule_form(**fields))

    assert response.status_code == 200
    assert error in response.content.decode()
    assert not StandingRule.objects.exists()


def test_whoever_saves_a_rule_makes_it(
    client: Client, fin: User, make_user: MakeUser
) -> None:
    """An edit never borrows the previous maker's rights."""
    made = StandingRule.objects.create(
        tool_name="refund", action="approve", reason="x", created_by=fin
    )
    editor = make_user("editor", *RULE_KEEPER, staff=True)
    client.force_login(editor)

    client.post(
        reverse("admin:deuz_django_standingrule_change", args=[made.pk]),
        rule_form(condition="amount <= 50"),
    )

    made.refresh_from_db()
    assert (made.created_by, made.condition[0]["value"]) == (editor, 50)


def test_the_rule_list_shows_each_rules_state_and_filters_by_it(
    client: Client, fin: User
) -> None:
    def make(reason: str, **fields: Any) -> None:
        StandingRule.objects.create(
            tool_name="refund",
            action="approve",
            reason=reason,
            created_by=fin,
            **fields,
        )

    make("live one")
    make("old one", expires_at=timezone.now() - timedelta(days=1))
    make("off one", active=False)

    html = client.get(RULES).content.decode()
    assert html.count("in force") >= 1
    assert "expired" in html
    assert "switched off" in html
    live = client.get(RULES, {"state": "in_force"}).content.decode()
    assert "live one" in live
    assert "old one" not in live
    assert "off one" not in live


def test_rules_are_switched_off_in_bulk(client: Client, fin: User) -> None:
    made = StandingRule.objects.create(
        tool_name="refund", action="approve", reason="x", created_by=fin
    )

    response = client.post(
        RULES,
        {"action": "switch_off", "_selected_action": [str(made.pk)]},
        follow=True,
    )

    assert messages_of(response) == ["Switched 1 rule off."]
    made.refresh_from_db()
    assert made.active is False


def test_a_rule_that_decided_is_not_deleted_from_the_admin(
    client: Client, make_user: MakeUser
) -> None:
    boss = make_user("boss", superuser=True)
    client.force_login(boss)
    made = StandingRule.objects.create(
        tool_name="send_email", action="approve", reason="x", created_by=boss
    )
    suspended(owner=make_user("ann"))
    assert Approval.objects.filter(decided_by_rule=made).exists()

    page = client.get(
        reverse("admin:deuz_django_standingrule_delete", args=[made.pk])
    ).content.decode()

    assert "<title>Cannot delete standing rule" in page
    refused = client.post(
        reverse("admin:deuz_django_standingrule_delete", args=[made.pk]),
        {"post": "yes"},
    )
    assert "<title>Cannot delete standing rule" in refused.content.decode()
    assert StandingRule.objects.filter(pk=made.pk).exists()


def test_the_run_page_names_the_rule_behind_an_automatic_decision(
    client: Client, fin: User, make_user: MakeUser
) -> None:
    made = StandingRule.objects.create(
        tool_name="refund", action="approve", reason="Routine.", created_by=fin
    )
    run = suspended(owner=make_user("ann"))

    html = client.get(run_url(run)).content.decode()

    rule_page = reverse("admin:deuz_django_standingrule_change", args=[made.pk])
    assert f'<a href="{rule_page}">rule #{made.pk}: approve refund, every call</a>' in (
        html
    )
    assert '<span class="deuz-badge deuz-badge--automatic">automatic</span>' in html
    assert "Routine." in html
    queue = client.get(
        reverse("admin:deuz_django_approval_changelist"),
        {"status": "all", "decider": "automatic"},
    ).content.decode()
    assert "<strong>refund</strong>" in queue
    assert "<strong>send_email</strong>" not in queue
    listed = client.get(RULES).content.decode()
    assert f"?status=all&amp;decided_by_rule={made.pk}" in listed
    by_rule = client.get(
        reverse("admin:deuz_django_approval_changelist"),
        {"status": "all", "decided_by_rule": made.pk},
    )
    assert by_rule.status_code == 200


# -- Approve and allow ----------------------------------------------------------------------


@pytest.fixture
def run(make_user: MakeUser) -> Run:
    """Ann's ``gated`` run: a refund (r1, separation of duties) and an email (e1)."""
    return suspended(owner=make_user("ann"))


def test_approve_and_allow_is_offered_with_the_owner_scope_only_where_it_may_be(
    client: Client, run: Run, fin: User
) -> None:
    html = client.get(run_url(run)).content.decode()

    assert html.count("Approve and allow …") == 2
    assert html.count('name="allow_scope" value="run"') == 2
    assert html.count('name="allow_scope" value="owner"') == 1  # send_email only
    assert "Refund calls may not be allowed for the owner&#x27;s runs" in html


def test_approving_and_allowing_is_confirmed_then_makes_the_grant(
    client: Client, run: Run, fin: User
) -> None:
    email = approval(run, "send_email")
    fields = {"verdict": "approve", "allow_scope": "owner", "allow_hours": "8"}

    page = client.post(decide_url(email), fields).content.decode()

    assert "Later send_email calls in ann&#x27;s gated runs are approved" in page
    assert 'name="allow_hours" value="8"' in page
    assert not Grant.objects.exists()

    done = client.post(decide_url(email), {**fields, "post": "yes"}, follow=True)

    grant = Grant.objects.get()
    assert (grant.scope, grant.owner.username, grant.created_by) == (
        "owner",
        "ann",
        fin,
    )
    expected = (
        f"Grant #{grant.pk}: send_email for ann's gated runs approves later calls "
        "automatically."
    )
    assert expected in messages_of(done)
    assert approval(run, "send_email").status == ApprovalStatus.APPROVED


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"allow_scope": "owner", "allow_hours": "0"},
            "allow.hours: give a whole number of hours from 1 to 168.",
        ),
        (
            {"allow_scope": "owner", "allow_hours": "many"},
            "Nothing was recorded: For how many hours: Enter a whole number.",
        ),
        (
            {"allow_scope": "forever"},
            "Nothing was recorded: Allow later calls: Select a valid choice.",
        ),
    ],
)
def test_a_bad_allowance_is_refused_and_nothing_is_recorded(
    client: Client, run: Run, fin: User, fields: dict[str, str], message: str
) -> None:
    email = approval(run, "send_email")

    done = client.post(
        decide_url(email), {"verdict": "approve", "post": "yes", **fields}, follow=True
    )

    assert any(message in m for m in messages_of(done)), messages_of(done)
    assert approval(run, "send_email").is_pending
    assert not Grant.objects.exists()


# -- grants ---------------------------------------------------------------------------------


def test_grants_are_listed_and_revoked(
    client: Client, run: Run, fin: User, make_user: MakeUser
) -> None:
    email = approval(run, "send_email")
    client.post(
        decide_url(email), {"verdict": "approve", "allow_scope": "run", "post": "yes"}
    )
    grant = Grant.objects.get()

    listed = client.get(GRANTS).content.decode()
    assert "calls on run" in listed
    assert "in force" in listed
    response = client.post(
        GRANTS, {"action": "revoke", "_selected_action": [str(grant.pk)]}, follow=True
    )

    assert messages_of(response) == ["Revoked 1 grant: it approves nothing more."]
    grant.refresh_from_db()
    assert (grant.revoked_by, grant.revoked) == (fin, True)
    assert "revoked" in client.get(GRANTS).content.decode()


def test_a_grants_page_is_read_only_and_others_see_only_their_own(
    client: Client, run: Run, fin: User, make_user: MakeUser
) -> None:
    client.post(
        decide_url(approval(run, "send_email")),
        {"verdict": "approve", "allow_scope": "run", "post": "yes"},
    )
    grant = Grant.objects.get()
    page = client.get(reverse("admin:deuz_django_grant_change", args=[grant.pk]))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()

    client.force_login(make_user("clerk", *DECIDER, staff=True))
    assert client.get(GRANTS).status_code == 403
