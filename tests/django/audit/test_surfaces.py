"""Every surface that decides — the admin, the REST API, the WebSocket, the ``deuz``
command — and every act the issue names lands in the audit chain, as what it was, by
whom, on which run and call; and the chain stays intact."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings

from deuz_django import audit, services
from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.models import AuditRecord, Run, StandingRule
from deuz_django.runs import recovery
from deuz_django.runs.replays import create_replay
from deuz_django.storage import leases
from tests.api.support import approve, started, verdicts_url
from tests.api.support import client as api_client
from tests.django.admin_support import decide_url, suspended_run
from tests.django.run_support import approval, let_time_pass, suspended
from tests.django.streaming.test_consumer import is_final_done, until

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]


def last(**filters: Any) -> AuditRecord:
    record = AuditRecord.objects.filter(**filters).order_by("sequence").last()
    assert record is not None, f"no audit record with {filters}"
    return record


def assert_intact() -> None:
    report = audit.verify_chain()
    assert report.breaks == []


def completed(owner: User) -> Run:
    """A ``scripted`` run of ``owner``'s that ran to its end."""
    run = services.start_run(
        agent="scripted", messages=[{"role": "user", "content": "hi"}], owner=owner
    )
    services.resume_run(run.run_id)
    return run


def who_did_what(record: AuditRecord) -> tuple[str, str, str, str]:
    return (record.action, record.actor, record.run_id, record.approval_id)


# -- a decision from each surface -----------------------------------------------------------


def test_a_decision_in_the_admin_is_audited(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("root", superuser=True))
    email = approval(run, "send_email")

    client.post(
        decide_url(email), {"verdict": "deny", "reason": "Not now.", "post": "yes"}
    )

    record = last(run_id=run.run_id)
    assert who_did_what(record) == ("decision", "root", run.run_id, email.approval_id)
    assert record.details == {
        "tool": "send_email",
        "kind": "approval",
        "status": "denied",
        "reason": "Not now.",
    }
    assert_intact()


def test_a_decision_over_rest_is_audited(make_user: MakeUser) -> None:
    ann = make_user("ann")
    run = started(ann)
    body = {"verdicts": [approve(run, "e1")], "resume": False}

    assert (
        api_client(ann).post(verdicts_url(run), body, format="json").status_code == 200
    )

    record = last(run_id=run.run_id)
    assert who_did_what(record) == ("decision", "ann", run.run_id, "e1")
    assert record.details["status"] == "approved"
    assert_intact()


@pytest.mark.django_db(transaction=True)
async def test_a_decision_on_the_websocket_is_audited(
    ws_as: Any, make_user: MakeUser
) -> None:
    ann = await sync_to_async(make_user)("ann")
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "asker", "text": "email ann"})
    frames = await until(ws, is_final_done)
    request = next(
        f["part"]
        for f in frames
        if f.get("part", {}).get("type") == "tool-approval-request"
    )
    run_id = frames[0]["runId"]
    await ws.send_json_to(
        {
            "type": "approval-response",
            "runId": run_id,
            "approvalId": request["approvalId"],
            "approved": True,
            "token": request["token"],
        }
    )
    await until(ws, is_final_done)

    record = await sync_to_async(last)(action="decision")
    assert who_did_what(record) == ("decision", "ann", run_id, request["approvalId"])
    await sync_to_async(assert_intact)()


@pytest.mark.parametrize(
    ("decider", "actor"),
    [(("--as", "root"), "root"), (("--operator", "night"), "night (operator)")],
)
def test_a_decision_from_the_command_is_audited(
    make_user: MakeUser, decider: tuple[str, str], actor: str
) -> None:
    make_user("root", superuser=True)
    run = suspended()

    call_command(
        "deuz",
        "resume",
        run.run_id,
        "--deny",
        "r1",
        "--deny",
        "e1",
        "--reason",
        "No.",
        *decider,
        stdout=StringIO(),
    )

    records = AuditRecord.objects.filter(run_id=run.run_id, action="decision")
    assert sorted((r.approval_id, r.actor) for r in records) == [
        ("e1", actor),
        ("r1", actor),
    ]
    assert_intact()


# -- the other acts -------------------------------------------------------------------------


def test_an_edit_and_a_grant_are_audited(make_user: MakeUser) -> None:
    fin = make_user(
        "fin",
        "deuz_django.view_run",
        "deuz_django.decide_approval",
        "deuz_django.edit_approval_input",
    )
    run = started(make_user("ann"), agent="payer")
    edited = {"to": "ann", "amount": 20.0}
    verdict = {**approve(run, "p1"), "editedInput": edited, "allow": {"scope": "run"}}
    body = {"verdicts": [verdict], "resume": False}

    response = api_client(fin).post(verdicts_url(run), body, format="json")

    assert response.status_code == 200, response.json()
    edit, grant = AuditRecord.objects.filter(run_id=run.run_id).order_by("sequence")
    assert who_did_what(edit) == ("edit", "fin", run.run_id, "p1")
    assert edit.details["editedInput"] == edited
    assert edit.details["input"] == {"to": "ann", "amount": 50.0}
    assert who_did_what(grant) == ("grant", "fin", run.run_id, "p1")
    assert grant.details["scope"] == "run"
    assert_intact()


def test_an_answer_is_audited(make_user: MakeUser) -> None:
    ann = make_user("ann")
    run = started(ann, agent="questioner")
    asked = run.approvals.get()
    body = {
        "verdicts": [
            {
                "approvalId": asked.approval_id,
                "approved": True,
                "token": asked.token,
                "answer": "card",
            }
        ],
        "resume": False,
    }

    response = api_client(ann).post(verdicts_url(run), body, format="json")

    assert response.status_code == 200, response.json()
    record = last(run_id=run.run_id)
    assert (record.action, record.details["answer"]) == ("answer", "card")
    assert_intact()


def test_a_timeout_is_audited_as_the_systems() -> None:
    run = suspended("timed")
    let_time_pass(run, 4 * timedelta(hours=1) + timedelta(seconds=1))

    deadline_sweep.sweep()

    record = last(run_id=run.run_id, action="timeout")
    assert (record.actor, record.approval_id) == ("the system", "e1")
    assert record.details["status"] == "expired"
    assert_intact()


def test_a_stop_is_audited_with_its_reason(make_user: MakeUser) -> None:
    ann = make_user("ann")
    run = started(ann)

    api_client(ann).post(
        f"/api/deuz/runs/{run.run_id}/stop/", {"reason": "Wrong order."}, format="json"
    )

    record = last(run_id=run.run_id, action="stop")
    assert (record.actor, record.details) == (
        "ann",
        {"reason": "Wrong order.", "bySystem": False},
    )
    assert_intact()


def test_a_fork_and_an_input_from_the_command_are_audited(make_user: MakeUser) -> None:
    ann = make_user("ann")
    run = completed(ann)
    out = StringIO()

    call_command("deuz", "fork", run.run_id, "--step", "0", "--as", "ann", stdout=out)
    fork_id = out.getvalue().strip()
    call_command("deuz", "input", fork_id, "And more.", "--as", "ann", stdout=out)

    fork = last(action="fork")
    assert (fork.actor, fork.run_id, fork.details["fork"]) == (
        "ann",
        run.run_id,
        fork_id,
    )
    sent = last(action="input")
    assert (sent.actor, sent.run_id, sent.details["text"]) == (
        "ann",
        fork_id,
        "And more.",
    )
    assert_intact()


def test_a_rule_made_changed_and_switched_off_in_the_admin_is_audited(
    client: Client, make_user: MakeUser
) -> None:
    client.force_login(make_user("root", superuser=True))
    form = {
        "tool_name": "refund",
        "agent": "",
        "condition": "amount <= 20",
        "action": "approve",
        "reason": "Small refunds are routine.",
        "expires_at_0": "",
        "expires_at_1": "",
        "active": "on",
    }
    client.post("/admin/deuz_django/standingrule/add/", form)
    rule = last(action="rule_change").details["rule"]
    client.post(
        f"/admin/deuz_django/standingrule/{rule}/change/",
        {**form, "reason": "Routine."},
    )
    client.post(
        "/admin/deuz_django/standingrule/",
        {"action": "switch_off", "_selected_action": [rule]},
    )

    changes = AuditRecord.objects.filter(action="rule_change").order_by("sequence")
    assert [(r.details["change"], r.details["reason"], r.actor) for r in changes] == [
        ("created", "Small refunds are routine.", "root"),
        ("changed", "Routine.", "root"),
        ("switched off", "Routine.", "root"),
    ]
    assert_intact()


def test_a_replay_is_audited(make_user: MakeUser) -> None:
    ann = make_user("ann")
    run = completed(ann)

    replay = create_replay(run.run_id, user=ann)

    record = last(action="replay")
    assert (record.actor, record.run_id, record.details["replay"]) == (
        "ann",
        run.run_id,
        replay.run_id,
    )
    assert_intact()


def test_a_recovery_and_one_given_up_are_audited_as_the_systems() -> None:
    run = services.start_run(
        agent="scripted", messages=[{"role": "user", "content": "hi"}]
    )
    lease = recovery.claim_for_recovery(run.run_id)
    assert lease is not None
    leases.release(lease)
    exhausted = override_settings(DEUZ={**settings.DEUZ, "RECOVERY_MAX_ATTEMPTS": 1})
    with exhausted, pytest.raises(recovery.RecoveryExhausted):
        recovery.claim_for_recovery(run.run_id)

    records = AuditRecord.objects.filter(run_id=run.run_id, action="recovery")
    assert [(r.actor, r.details) for r in records.order_by("sequence")] == [
        ("the system", {"attempt": 1, "gaveUp": False, "by": "sweep"}),
        ("the system", {"attempt": 2, "gaveUp": True, "by": "sweep"}),
    ]
    assert_intact()


def test_a_runs_audit_records_are_read_over_rest_by_who_may_see_it(
    make_user: MakeUser,
) -> None:
    ann = make_user("ann")
    run = started(ann)
    body = {"verdicts": [approve(run, "e1")], "resume": False}
    api_client(ann).post(verdicts_url(run), body, format="json")
    audit.append("stop", run_id="another-run")
    url = f"/api/deuz/runs/{run.run_id}/audit/"

    response = api_client(ann).get(url)

    assert response.status_code == 200
    (record,) = response.json()["results"]
    stored = last(run_id=run.run_id)
    assert record["digest"] == stored.digest
    assert (record["action"], record["actor"], record["approvalId"]) == (
        "decision",
        "ann",
        "e1",
    )
    del record["actor"]  # for people; the rest is what the digest covers
    assert audit.chain.digest_of(record) == stored.digest
    assert api_client(make_user("eve")).get(url).status_code == 404


def test_a_grant_revoked_and_a_rule_deleted_in_the_admin_are_audited(
    client: Client, make_user: MakeUser
) -> None:
    fin = make_user(
        "fin", "deuz_django.view_run", "deuz_django.decide_approval", staff=True
    )
    run = started(make_user("ann"), agent="payer")
    verdict = {**approve(run, "e1"), "allow": {"scope": "run"}}
    body = {"verdicts": [verdict], "resume": False}
    assert (
        api_client(fin).post(verdicts_url(run), body, format="json").status_code == 200
    )
    grant = last(action="grant").details["grant"]
    StandingRule.objects.create(tool_name="refund", action="approve", reason="Small.")
    rule = StandingRule.objects.get()
    client.force_login(make_user("root", superuser=True))

    client.post(
        "/admin/deuz_django/grant/", {"action": "revoke", "_selected_action": [grant]}
    )
    client.post(
        "/admin/deuz_django/standingrule/",
        {"action": "delete_selected", "_selected_action": [rule.pk], "post": "yes"},
    )

    revoked = last(action="grant_revoked")
    assert (revoked.actor, revoked.run_id, revoked.details["grant"]) == (
        "root",
        run.run_id,
        grant,
    )
    deleted = last(action="rule_change")
    assert (deleted.actor, deleted.details["change"], deleted.details["rule"]) == (
        "root",
        "deleted",
        rule.pk,
    )
    assert not StandingRule.objects.exists()
    assert_intact()


def test_a_decision_whose_record_cannot_be_written_is_not_recorded_either(
    make_user: MakeUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    ann = make_user("ann")
    run = started(ann)

    def broken(*args: Any) -> None:
        raise RuntimeError("the audit table is gone")

    monkeypatch.setattr(audit.chain, "_write", broken)
    with pytest.raises(RuntimeError):
        services.decide_approval(approval(run, "send_email"), user=ann, approved=True)

    assert approval(run, "send_email").is_pending
    assert not AuditRecord.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_standing_rules_decision_is_audited_as_the_systems_naming_the_rule(
    make_user: MakeUser,
) -> None:
    maker = make_user("root", superuser=True)
    refunds = StandingRule.objects.create(
        tool_name="refund", action="deny", reason="No refunds today.", created_by=maker
    )

    run = started(make_user("ann"))

    record = last(run_id=run.run_id, approval_id="r1")
    assert (record.action, record.actor) == ("decision", "the system")
    assert (record.details["rule"], record.details["status"]) == (refunds.pk, "denied")
    assert_intact()
