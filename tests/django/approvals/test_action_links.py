"""The page a notification's link opens: a GET shows the call and never decides; a POST
from it, by a signed-in user who may decide, records the verdict and resumes the run;
forged, expired and replayed links, and users who may not decide, record nothing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.test import Client
from django.urls import reverse

from deuz_django.approvals import links as action_links
from deuz_django.models import Approval, Run
from deuz_django.runs.continuing import join_handed_off
from tests.django.agents import TOOL_PERMISSION
from tests.django.notify_support import notifying
from tests.django.run_support import age, approval, background_leg, in_doubt, suspended

pytestmark = pytest.mark.django_db

DECIDER = ("deuz_django.view_run", "deuz_django.decide_approval")


@pytest.fixture(autouse=True)
def links_on() -> Iterator[None]:
    with notifying():
        yield


@pytest.fixture
def boss(make_user: Callable[..., User]) -> User:
    return make_user("boss", *DECIDER, TOOL_PERMISSION)


@pytest.fixture
def run(ann: User) -> Run:
    return suspended(owner=ann)


def path(call: Approval, action: str) -> str:
    return reverse(
        action_links.ROUTE, kwargs={"token": action_links.make_token(call, action)}
    )


def browser(user: User | None = None, **options: Any) -> Client:
    client = Client(**options)
    if user is not None:
        client.force_login(user)
    return client


def status_of(call: Approval) -> tuple[str, Any]:
    call.refresh_from_db()
    return call.status, call.decided_by


def test_opening_a_link_shows_the_call_and_decides_nothing(
    run: Run, boss: User
) -> None:
    refund = approval(run, "refund")
    for action in ("approve", "deny", "open"):
        page = browser(boss).get(path(refund, action))
        assert page.status_code == 200
        text = page.content.decode()
        assert "refund" in text
        assert "&quot;order_id&quot;: &quot;A-1&quot;" in text
        assert run.run_id in text
    assert status_of(refund) == ("pending", None)


def test_the_page_offers_the_links_verdict_or_both_for_open(
    run: Run, boss: User
) -> None:
    refund = approval(run, "refund")
    for action, buttons in (
        ("approve", [("approve", "Approve")]),
        ("deny", [("deny", "Deny")]),
        ("open", [("approve", "Approve"), ("deny", "Deny")]),
    ):
        page = browser(boss).get(path(refund, action))
        assert page.context["buttons"] == buttons


def test_nobody_signed_in_is_sent_to_sign_in_and_back(run: Run) -> None:
    link = path(approval(run, "refund"), "approve")
    page = browser().get(link)
    assert page.status_code == 302
    login = urlsplit(page["Location"])
    assert (login.path, parse_qs(login.query)) == (settings.LOGIN_URL, {"next": [link]})
    assert browser().post(link, {"verdict": "approve"}).status_code == 302
    assert status_of(approval(run, "refund")) == ("pending", None)


def test_a_forged_changed_or_cut_link_is_refused_and_records_nothing(
    run: Run, boss: User
) -> None:
    refund, email = approval(run, "refund"), approval(run, "send_email")
    good = action_links.make_token(refund, "approve")
    payload, stamp, mac = good.split(":")
    other_payload = action_links.make_token(email, "approve").split(":")[0]
    for token in (
        f"{payload}:{stamp}:{mac[:-2]}xx",  # a changed signature
        f"{other_payload}:{stamp}:{mac}",  # another call under this signature
        good[:-10],  # cut short
        signing.dumps({"a": refund.pk, "i": "r1", "x": "approve"}, salt="other"),
        signing.dumps({"a": refund.pk, "x": "approve"}, salt=action_links.SALT),
        "not-a-token",
    ):
        page = browser(boss).post(
            reverse(action_links.ROUTE, kwargs={"token": token}), {"verdict": "approve"}
        )
        assert page.status_code == 400, token
        assert "This link is not valid" in page.content.decode()
    assert status_of(refund) == ("pending", None)


def test_an_expired_link_says_so_and_records_nothing(
    run: Run, boss: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    refund = approval(run, "refund")
    link = path(refund, "approve")
    later = time.time() + settings.DEUZ.get("ACTION_LINK_MAX_AGE", 7 * 24 * 3600) + 60
    monkeypatch.setattr(signing.time, "time", lambda: later)
    page = browser(boss).post(link, {"verdict": "approve"})
    assert page.status_code == 410
    assert "This link has expired" in page.content.decode()
    assert status_of(refund) == ("pending", None)


def test_a_call_on_a_run_the_user_may_not_see_is_not_found(
    run: Run, make_user: Callable[..., User]
) -> None:
    stranger = make_user("stranger", "deuz_django.decide_approval", TOOL_PERMISSION)
    link = path(approval(run, "refund"), "approve")
    assert browser(stranger).get(link).status_code == 404
    assert browser(stranger).post(link, {"verdict": "approve"}).status_code == 404
    assert status_of(approval(run, "refund")) == ("pending", None)


@pytest.mark.parametrize(
    ("owner_perms", "who", "why"),
    [
        # separation of duties: the refund's owner never approves it, even with the right
        ((TOOL_PERMISSION,), "owner", "The run&#x27;s owner may not approve their own"),
        ((), "clerk", "needs the &#x27;auth.view_group&#x27; permission."),
    ],
)
def test_a_user_who_may_not_decide_is_told_why_and_nothing_is_recorded(
    make_user: Callable[..., User], owner_perms: tuple[str, ...], who: str, why: str
) -> None:
    owner = make_user("owner", *owner_perms)
    user = owner if who == "owner" else make_user("clerk", *DECIDER)
    refund = approval(suspended(owner=owner), "refund")
    link = path(refund, "approve")
    for page in (
        browser(user).get(link),
        browser(user).post(link, {"verdict": "approve"}),
    ):
        assert page.status_code == 403
        assert why in page.content.decode()
    assert status_of(refund) == ("pending", None)


def test_the_owner_who_may_only_deny_is_offered_deny_and_denies(
    run: Run, ann: User
) -> None:
    link = path(approval(run, "refund"), "open")
    assert browser(ann).get(link).context["buttons"] == [("deny", "Deny")]
    refused = browser(ann).post(link, {"verdict": "approve"})
    assert refused.status_code == 400
    assert status_of(approval(run, "refund")) == ("pending", None)
    browser(ann).post(link, {"verdict": "deny", "reason": "Not this one."})
    refund = approval(run, "refund")
    assert (refund.status, refund.decided_by, refund.reason) == (
        "denied",
        ann,
        "Not this one.",
    )


@background_leg
def test_confirming_decides_and_the_last_verdict_resumes_the_run(
    run: Run, ann: User, boss: User
) -> None:
    refund_link = path(approval(run, "refund"), "approve")
    page = browser(boss).post(refund_link, {"verdict": "approve", "reason": "ok"})
    assert (page.status_code, page["Location"]) == (302, refund_link)
    assert status_of(approval(run, "refund")) == ("approved", boss)
    run.refresh_from_db()
    assert run.status == "suspended"  # send_email still waits
    done = browser(ann).post(
        path(approval(run, "send_email"), "approve"),
        {"verdict": "approve"},
        follow=True,
    )
    assert status_of(approval(run, "send_email")) == ("approved", ann)
    join_handed_off()
    run.refresh_from_db()
    assert run.status == "completed"
    text = done.content.decode()
    assert "This call was decided already" in text
    assert "by ann" in text
    assert f"Run {run.run_id} resumed: it continues on this server" in text


def test_a_link_used_again_after_the_verdict_changes_nothing(
    run: Run, boss: User, make_user: Callable[..., User]
) -> None:
    link = path(approval(run, "refund"), "approve")
    browser(boss).post(link, {"verdict": "approve"})
    decided = approval(run, "refund").decided_at
    other = make_user("other", *DECIDER, TOOL_PERMISSION)
    for client in (browser(boss), browser(other)):
        again = client.post(link, {"verdict": "approve"})
        assert again.status_code == 409
        assert "This call was decided already" in again.content.decode()
        assert "by boss" in again.content.decode()
    refund = approval(run, "refund")
    assert (refund.status, refund.decided_by, refund.decided_at) == (
        "approved",
        boss,
        decided,
    )


@pytest.mark.parametrize(
    ("form", "field"),
    [
        ({"verdict": "deny"}, "Verdict"),  # an approve link does not deny
        ({"verdict": "maybe"}, "Verdict"),
        ({}, "Verdict"),
        ({"verdict": "approve", "reason": "x" * 2001}, "Reason"),
    ],
)
def test_a_bad_form_names_the_field_and_records_nothing(
    run: Run, boss: User, form: dict[str, str], field: str
) -> None:
    page = browser(boss).post(path(approval(run, "refund"), "approve"), form)
    assert page.status_code == 400
    text = page.content.decode()
    assert "Nothing was recorded" in text
    assert field in text
    assert status_of(approval(run, "refund")) == ("pending", None)


def test_a_post_without_the_csrf_token_is_refused(run: Run, boss: User) -> None:
    client = browser(boss, enforce_csrf_checks=True)
    page = client.post(path(approval(run, "refund"), "approve"), {"verdict": "approve"})
    assert page.status_code == 403
    assert status_of(approval(run, "refund")) == ("pending", None)


def test_a_call_too_old_to_decide_is_not_decided(run: Run, boss: User) -> None:
    refund = approval(run, "refund")
    age(refund, 120)
    with notifying(APPROVAL_MAX_AGE=60):
        link = path(refund, "approve")
        assert browser(boss).get(link).status_code == 410
        page = browser(boss).post(link, {"verdict": "approve"})
    assert page.status_code == 410
    assert "can no longer be decided" in page.content.decode()
    assert status_of(refund) == ("pending", None)


def test_only_get_and_post_are_answered(run: Run, boss: User) -> None:
    link = path(approval(run, "refund"), "approve")
    assert browser(boss).put(link).status_code == 405
    assert browser(boss).delete(link).status_code == 405


def test_a_call_in_doubt_offers_its_answers(ann: User) -> None:
    doubt = Approval.objects.get(run=in_doubt(ann), kind="outcome_unknown")
    page = browser(ann).get(path(doubt, "open"))
    assert page.context["buttons"] == [
        ("approve", "Run it again"),
        ("deny", "Mark it failed"),
    ]
    assert "started before a crash" in page.content.decode()


def test_staff_who_see_the_queue_get_a_link_to_the_admin(
    run: Run, make_user: Callable[..., User]
) -> None:
    staff = make_user(
        "staffer", *DECIDER, TOOL_PERMISSION, "deuz_django.view_approval", staff=True
    )
    refund = approval(run, "refund")
    page = browser(staff).get(path(refund, "open"))
    admin_url = reverse("admin:deuz_django_approval_change", args=[refund.pk])
    assert page.context["admin_url"] == admin_url
    plain = browser(make_user("plain", *DECIDER)).get(
        path(approval(run, "send_email"), "open")
    )
    assert (plain.status_code, plain.context["admin_url"]) == (200, None)
