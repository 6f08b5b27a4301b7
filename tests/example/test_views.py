"""The chat page, its login, and the JSON endpoint that tells the chat who may decide
(the package's ``deuz_django.approvals.chat_view``, asked here about the demo's runs)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils.html import escape

from deuz_django.approvals.chat_view import grant_label
from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.models import Grant, GrantScope, StandingRule
from example_project.views import PROMPTS
from tests.django.run_support import let_time_pass

from .support import ask, pending

pytestmark = pytest.mark.django_db(transaction=True)


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_chat_sends_anonymous_visitors_to_the_login_page(shop: Any) -> None:
    response = Client().get("/")
    assert (response.status_code, response["Location"]) == (302, "/login/?next=/")


def test_signing_in_leads_to_the_chat(shop: Any) -> None:
    client = Client()
    page = client.get("/login/?next=/")
    assert b'<label for="id_username">Username</label>' in page.content
    response = client.post(
        "/login/", {"username": "customer", "password": "customer-pass", "next": "/"}
    )
    assert (response.status_code, response["Location"]) == (302, "/")
    chat = client.get("/")
    assert chat.status_code == 200
    assert b"Signed in as <strong>customer</strong>" in chat.content


def test_a_wrong_password_is_said_so(shop: Any) -> None:
    page = Client().post("/login/", {"username": "customer", "password": "nope"})
    assert page.status_code == 200
    assert b'role="alert"' in page.content


@pytest.mark.parametrize(("debug", "shown"), [(True, True), (False, False)])
def test_the_login_page_names_the_demo_accounts_only_in_development(
    shop: Any, debug: bool, shown: bool
) -> None:
    with override_settings(DEBUG=debug):
        page = Client().get("/login/")
    assert (b"customer-pass" in page.content) is shown


def test_the_chat_page_carries_no_secret(shop: Any) -> None:
    page = signed_in(shop["customer"]).get("/")
    content = page.content.decode()
    assert settings.DEUZ["APPROVAL_SECRET"] not in content
    assert settings.SECRET_KEY not in content
    assert 'socket="/ws/deuz/"' in content
    assert 'approvals-url="/deuz/runs/RUN_ID/approvals/"' in content


def test_the_chat_offers_the_example_questions_the_readme_suggests(shop: Any) -> None:
    content = signed_in(shop["customer"]).get("/").content.decode()
    # Suggested in README.md (or the docs its text moves to), words wrapped anywhere.
    pages = [
        settings.BASE_DIR / "README.md",
        *(settings.BASE_DIR / "docs").rglob("*.md"),
    ]
    readme = " ".join(" ".join(page.read_text() for page in pages).split())
    for prompt in PROMPTS:
        assert f'<button type="button" data-prompt>{escape(prompt)}</button>' in content
        assert f'"{prompt}"' in readme


def test_logging_out_returns_to_the_login_page(shop: Any) -> None:
    client = signed_in(shop["customer"])
    response = client.post("/logout/")
    assert (response.status_code, response["Location"]) == (302, "/login/")
    assert client.get("/").status_code == 302


def test_the_owner_may_decide_an_email_but_only_staff_a_refund(shop: Any) -> None:
    email = ask(shop["customer"], "Email me the details")
    refund = ask(shop["customer"], "Please refund order A-1001")
    customer, staff = signed_in(shop["customer"]), signed_in(shop["staff"])

    assert customer.get(f"/deuz/runs/{email.run_id}/approvals/").json() == {
        "runId": email.run_id,
        "approvals": [
            {
                "approvalId": "email_1",
                "kind": "approval",
                "toolName": "send_email",
                "status": "pending",
                "mayDecide": True,
                "refusal": None,
                "editable": False,
                "deadline": None,  # an email waits for the customer as long as it takes
                "secondsLeft": None,
                "escalateTo": None,
                "escalatedTo": None,
                "automatic": None,
            }
        ],
    }
    (mine,) = customer.get(f"/deuz/runs/{refund.run_id}/approvals/").json()["approvals"]
    assert (mine["toolName"], mine["mayDecide"]) == ("issue_refund", False)
    assert "approve_refund" in mine["refusal"]
    (theirs,) = staff.get(f"/deuz/runs/{refund.run_id}/approvals/").json()["approvals"]
    assert (theirs["mayDecide"], theirs["refusal"]) == (True, None)
    assert (mine["editable"], theirs["editable"]) == (False, True)  # staff may edit it


def test_a_call_a_standing_rule_decided_names_the_rule_and_its_reason(
    shop: Any,
) -> None:
    run = ask(shop["customer"], "Please refund $12 on order A-1002")
    rule = StandingRule.objects.get()

    (row,) = (
        signed_in(shop["customer"])
        .get(f"/deuz/runs/{run.run_id}/approvals/")
        .json()["approvals"]
    )

    assert (row["status"], row["automatic"]) == (
        "approved",
        {
            "by": "rule",
            "decider": str(rule),
            "reason": "Refunds of at most $20 are approved automatically.",
        },
    )
    assert (row["deadline"], row["secondsLeft"]) == (None, None)  # nothing to count


def test_approvals_of_a_run_are_hidden_from_others_and_anonymous_users(
    shop: Any,
) -> None:
    run = ask(shop["customer"], "Email me the details")
    url = f"/deuz/runs/{run.run_id}/approvals/"
    stranger = User.objects.create_user("eve", password="pw")
    assert signed_in(stranger).get(url).status_code == 404
    assert (
        signed_in(shop["customer"]).get("/deuz/runs/nope/approvals/").status_code == 404
    )
    anonymous = Client().get(url)
    assert (anonymous.status_code, anonymous.json()["code"]) == (
        401,
        "not_authenticated",
    )


def test_the_chat_is_told_each_calls_deadline_and_what_happens_then(
    shop: Any,
) -> None:
    run = ask(shop["customer"], "Please refund order A-1001")
    customer = signed_in(shop["customer"])
    url = f"/deuz/runs/{run.run_id}/approvals/"
    (refund,) = customer.get(url).json()["approvals"]
    assert refund["deadline"] == pending(run).deadline_at.isoformat()  # type: ignore[union-attr]
    assert 3590 < refund["secondsLeft"] <= 3600
    assert (refund["escalateTo"], refund["escalatedTo"]) == ("Finance leads", None)

    let_time_pass(run, timedelta(hours=1, seconds=1))
    deadline_sweep.sweep()
    (refund,) = customer.get(url).json()["approvals"]
    assert 3590 < refund["secondsLeft"] <= 3600  # an hour more, for the leads
    assert (refund["escalateTo"], refund["escalatedTo"]) == (None, "Finance leads")

    let_time_pass(run, timedelta(hours=1, seconds=1))
    deadline_sweep.sweep()
    (refund,) = customer.get(url).json()["approvals"]
    assert refund["status"] == "expired"
    assert [refund[k] for k in ("deadline", "secondsLeft", "escalateTo")] == [
        None,
        None,
        None,
    ]
    assert refund["escalatedTo"] == "Finance leads"


def test_a_grant_is_named_for_the_customer_without_its_runs_id() -> None:
    grant = Grant(pk=3, tool_name="send_email", scope=GrantScope.RUN)
    assert grant_label(grant) == "grant #3: send_email in this conversation"
