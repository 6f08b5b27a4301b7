"""A call a crash left in doubt, settled in the admin: the run page asks whether it
happened and offers three answers — record its result, run it again, mark it failed —
each through the same confirmation, permission checks and audit trail as Approve/Deny."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from deuz_django.models import ApprovalStatus, RunCall, RunStatus
from deuz_django.runs.continuing import join_handed_off
from tests.django.admin_support import (
    QUEUE,
    VIEWER,
    approval,
    decide_url,
    messages_of,
    run_url,
    suspended_run,
)
from tests.django.run_support import background_leg, in_doubt, tool_results

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]
QUESTION = (
    "This call started before a crash and left no outcome, and its tool is not safe "
    "to run twice: did it happen?"
)


@pytest.fixture
def ann(make_user: MakeUser) -> User:
    """The run's owner, signed in to the admin: she may settle her own run's calls."""
    return make_user("ann", *VIEWER, staff=True)


def answer(client: Client, run: Any, verdict: str, **fields: str) -> Any:
    """Press one of the three answers, confirm, and follow back to the run page; then
    wait for the leg the answer resumed."""
    response = client.post(
        decide_url(approval(run, "slow")),
        {"verdict": verdict, "post": "yes", **fields},
        follow=True,
    )
    join_handed_off()
    return response


def unfinished_calls(run: Any) -> int:
    return RunCall.objects.filter(step__run=run, finished=False).count()


def test_the_run_page_asks_whether_the_call_happened_and_offers_three_answers(
    client: Client, ann: User
) -> None:
    run = in_doubt(ann)
    client.force_login(ann)

    html = client.get(run_url(run)).content.decode()

    assert QUESTION in html
    assert "It happened — record this result" in html
    assert 'name="result"' in html
    assert 'name="is_error"' in html
    assert 'value="happened"' in html
    assert ">Run it again<" in html
    assert ">Mark it failed<" in html
    assert ">Approve<" not in html
    assert ">Deny<" not in html


@background_leg
def test_it_happened_asks_for_confirmation_then_records_the_result_without_running(
    client: Client, ann: User, effects: Callable[[], list[str]]
) -> None:
    run = in_doubt(ann)
    client.force_login(ann)
    asked = approval(run, "slow")

    page = client.post(
        decide_url(asked),
        {"verdict": "happened", "result": '"slow 1 done (checked by hand)"'},
    )

    html = page.content.decode()
    assert QUESTION in html
    assert "The result to record" in html
    assert "&quot;slow 1 done (checked by hand)&quot;" in html
    assert 'value="It happened — record this result"' in html
    assert approval(run, "slow").is_pending  # nothing recorded yet

    done = answer(
        client,
        run,
        "happened",
        result='"slow 1 done (checked by hand)"',
        reason="Saw it in the log.",
    )

    assert messages_of(done) == [
        f"Recorded the result of slow (s1) on run {run.run_id}: it happened.",
        f"Run {run.run_id} resumed: it continues on this server.",
    ]
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert tool_results(run)["s1"] == ("slow 1 done (checked by hand)", False)
    assert "slow:1:start" not in effects()
    settled = approval(run, "slow")
    assert (settled.status, settled.decided_by, settled.reason) == (
        ApprovalStatus.APPROVED,
        ann,
        "Saw it in the log.",
    )


@background_leg
def test_it_happened_with_is_error_records_the_result_as_the_calls_error(
    client: Client, ann: User, effects: Callable[[], list[str]]
) -> None:
    run = in_doubt(ann)
    client.force_login(ann)

    page = client.post(
        decide_url(approval(run, "slow")),
        {"verdict": "happened", "result": '{"error": "disk full"}', "is_error": "on"},
    )
    assert "The error to record" in page.content.decode()
    assert '<input type="hidden" name="is_error" value="on">' in page.content.decode()

    answer(client, run, "happened", result='{"error": "disk full"}', is_error="on")

    assert tool_results(run)["s1"] == ({"error": "disk full"}, True)
    assert "slow:1:start" not in effects()


@background_leg
def test_run_it_again_runs_the_call_once_more(
    client: Client, ann: User, effects: Callable[[], list[str]]
) -> None:
    run = in_doubt(ann)
    client.force_login(ann)

    page = client.post(decide_url(approval(run, "slow")), {"verdict": "approve"})
    assert "The call runs once more when the run continues." in page.content.decode()
    assert 'value="Run it again"' in page.content.decode()

    done = answer(client, run, "approve")

    assert messages_of(done)[0] == f"slow (s1) on run {run.run_id} will run again."
    assert effects().count("slow:1:start") == 1
    assert tool_results(run)["s1"] == ("slow 1 done", False)


@background_leg
def test_mark_it_failed_answers_the_call_with_an_error(
    client: Client, ann: User, effects: Callable[[], list[str]]
) -> None:
    run = in_doubt(ann)
    client.force_login(ann)

    done = answer(client, run, "deny", reason="The provider says it never arrived.")

    assert messages_of(done)[0] == f"Marked slow (s1) on run {run.run_id} failed."
    assert "slow:1:start" not in effects()
    result, is_error = tool_results(run)["s1"]
    assert is_error
    assert "The provider says it never arrived." in result
    assert approval(run, "slow").status == ApprovalStatus.DENIED


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "Enter a valid JSON."),
        ("", "Give the call's result as JSON."),
    ],
)
def test_a_result_that_is_not_json_is_a_form_error_and_nothing_is_recorded(
    client: Client, ann: User, text: str, problem: str
) -> None:
    run = in_doubt(ann)
    client.force_login(ann)

    for confirmed in ({}, {"post": "yes"}):
        response = client.post(
            decide_url(approval(run, "slow")),
            {"verdict": "happened", "result": text, **confirmed},
            follow=True,
        )
        assert messages_of(response) == [
            f"Nothing was recorded: Result (JSON): {problem}"
        ]
    assert approval(run, "slow").is_pending
    assert unfinished_calls(run) == 1
    run.refresh_from_db()
    assert run.status == RunStatus.SUSPENDED


def test_a_viewer_sees_the_question_but_no_answers_and_a_crafted_post_is_refused(
    client: Client, ann: User, make_user: MakeUser
) -> None:
    run = in_doubt(ann)
    client.force_login(make_user("viewer", *VIEWER, staff=True))

    html = client.get(run_url(run)).content.decode()
    assert QUESTION in html
    assert 'value="happened"' not in html
    assert ">Run it again<" not in html

    response = answer(client, run, "happened", result='"done"')
    assert response.status_code == 403
    assert approval(run, "slow").is_pending
    assert unfinished_calls(run) == 1


def test_a_result_is_refused_on_a_gated_calls_approval(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("root", superuser=True))

    response = client.post(
        decide_url(approval(run, "send_email")),
        {"verdict": "happened", "result": '"sent"', "post": "yes"},
        follow=True,
    )

    assert messages_of(response) == [
        f"send_email (e1) on run {run.run_id} was not approved: Approval e1: only "
        "approving an outcome-unknown call records a result."
    ]
    assert approval(run, "send_email").is_pending


def test_the_queue_and_the_approvals_page_show_the_kind(
    client: Client, ann: User
) -> None:
    run = in_doubt(ann)
    client.force_login(ann)

    queue = client.get(QUEUE).content.decode()
    assert '<span class="deuz-badge deuz-badge--outcome_unknown">outcome unknown' in (
        queue
    )
    page = client.get(
        reverse("admin:deuz_django_approval_change", args=[approval(run, "slow").pk])
    )
    assert QUESTION in page.content.decode()
