"""``manage.py deuz``: runs, show, resume, recover, prune — output and exit codes."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from deuz_django import leases, services
from deuz_django.models import Run, StreamEntry

from .processes import run_manage
from .run_support import PROMPT, approval, suspended, tool_results

pytestmark = pytest.mark.django_db


def deuz(*args: str) -> str:
    out = io.StringIO()
    call_command("deuz", *args, stdout=out)
    return out.getvalue()


def fails(*args: str) -> CommandError:
    with pytest.raises(CommandError) as caught:
        deuz(*args)
    return caught.value


@pytest.fixture
def ann(make_user: Callable[..., Any]) -> Any:
    return make_user("ann")


def test_runs_lists_root_runs_in_a_table_and_filters_them(ann: Any) -> None:
    assert deuz("runs").strip() == "No runs."
    waiting = suspended(owner=ann)
    done = services.start_run(agent="scripted", messages=PROMPT)
    services.resume_run(done.run_id)
    lines = deuz("runs").splitlines()
    assert lines[0].split() == [
        "RUN",
        "AGENT",
        "OWNER",
        "STATUS",
        "STEPS",
        "TOKENS",
        "PENDING",
        "UPDATED",
    ]
    assert set(lines[1]) == {"-", " "}
    rows = {line.split()[0]: line.split()[1:7] for line in lines[2:]}
    assert rows == {
        waiting.run_id: ["gated", "ann", "suspended", "1", "15", "2"],
        done.run_id: ["scripted", "-", "completed", "2", "41", "0"],
    }
    only = deuz("runs", "--status", "suspended", "--agent", "gated", "--owner", "ann")
    assert [line.split()[0] for line in only.splitlines()[2:]] == [waiting.run_id]
    assert deuz("runs", "--owner", "nobody").strip() == "No runs."


def test_runs_json_prints_one_object_per_run(ann: Any) -> None:
    run = suspended(owner=ann)
    (line,) = deuz("runs", "--json").splitlines()
    data = json.loads(line)
    assert data["runId"] == run.run_id
    assert (data["agent"], data["owner"], data["status"], data["stepIndex"]) == (
        "gated",
        "ann",
        "suspended",
        1,
    )
    assert data["pendingApprovals"] == 2
    assert data["usage"]["totalTokens"] == 15


def test_show_prints_the_transcript_and_the_approvals(ann: Any) -> None:
    run = suspended(owner=ann)
    services.decide_approval(
        approval(run, "send_email"), user=ann, approved=False, reason="Not now."
    )
    out = deuz("show", run.run_id)
    assert f"Run {run.run_id}  agent=gated  status=suspended" in out
    assert "[user] text: Refund order A-1 and email Ann." in out
    assert "[assistant] tool-call refund (r1):" in out
    assert "Approvals:" in out
    email_row = next(line for line in out.splitlines() if line.startswith("e1"))
    assert email_row.split()[:5] == ["e1", "send_email", "-", "denied", "ann"]
    assert "Not now." in email_row


def test_resume_records_verdicts_then_runs_the_leg(ann: Any, effects: Any) -> None:
    run = suspended(owner=ann)
    out = deuz(
        "resume", run.run_id, "--approve", "e1", "--deny", "r1", "--reason", "Fraud."
    )
    assert out.strip() == f"Run {run.run_id}: completed"
    assert effects() == ["send_email:ann@example.com"]
    refund = approval(run, "refund")
    assert (refund.status, refund.reason, refund.decided_by) == (
        "denied",
        "Fraud.",
        None,
    )
    assert tool_results(run)["r1"] == ("Tool call denied. Reason: Fraud.", True)


def test_resume_with_deny_remaining_denies_what_is_undecided(
    ann: Any, effects: Any
) -> None:
    run = suspended(owner=ann)
    assert "completed" in deuz("resume", run.run_id, "--deny-remaining")
    assert effects() == []
    assert {a.status for a in run.approvals.all()} == {"denied"}


def test_resume_that_leaves_the_run_suspended_says_what_is_pending(ann: Any) -> None:
    run = suspended(owner=ann)
    error = fails("resume", run.run_id, "--approve", "e1")
    assert error.returncode == 1
    assert "still waits for a verdict on r1" in str(error)
    assert approval(run, "send_email").status == "approved"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["resume", "RUN", "--approve", "zz"], "has no approval 'zz'"),
        (
            ["resume", "RUN", "--approve", "e1", "--deny", "e1"],
            "Both approved and denied",
        ),
        (["resume", "RUN", "--reason", "why"], "--reason goes with --deny"),
        (["resume"], "the following arguments are required: run_id"),
        (["prune"], "required: --completed-before"),
        (["prune", "--completed-before", "soon"], "invalid float value"),
        (["explode"], "invalid choice: 'explode'"),
        ([], "required: ACTION"),
    ],
)
def test_bad_arguments_exit_with_2(ann: Any, args: list[str], message: str) -> None:
    run = suspended(owner=ann)
    error = fails(*[run.run_id if a == "RUN" else a for a in args])
    assert error.returncode == 2
    assert message in str(error)


def test_an_unknown_busy_or_completed_run_exits_with_1(ann: Any) -> None:
    for action in ("show", "resume"):
        error = fails(action, "no-such-run")
        assert (error.returncode, str(error)) == (1, "No run 'no-such-run'.")
    run = services.start_run(agent="scripted", messages=PROMPT)
    lease = leases.acquire(run.run_id)
    error = fails("resume", run.run_id)
    assert error.returncode == 1
    assert "is busy" in str(error)
    leases.release(lease)
    deuz("resume", run.run_id)
    error = fails("resume", run.run_id)
    assert (error.returncode, str(error)) == (1, f"Run '{run.run_id}' is completed.")


def test_a_failed_leg_exits_with_1_and_says_why(settings: Any) -> None:
    settings.DEUZ = {
        **settings.DEUZ,
        "AGENTS": {
            **settings.DEUZ["AGENTS"],
            "broken": "tests.django.test_run_service.broken",
        },
    }
    run = services.start_run(agent="broken", messages=PROMPT)
    error = fails("resume", run.run_id)
    assert error.returncode == 1
    assert "The leg failed" in str(error)
    assert "model is down" in str(error)


def test_recover_re_drives_runs_left_behind(ann: Any, effects: Any) -> None:
    assert deuz("recover").strip() == "Nothing to recover."
    stalled = services.start_run(agent="scripted", messages=PROMPT)
    decided = suspended(owner=ann)
    services.record_operator_verdict(approval(decided, "send_email"), approved=True)
    services.record_operator_verdict(approval(decided, "refund"), approved=False)
    suspended(owner=ann)  # still waiting for people: not recovered
    assert deuz("recover", "--older-than", "3600").strip() == "Nothing to recover."
    assert deuz("recover", "--older-than", "0", "--dry-run").splitlines() == [
        f"would recover {stalled.run_id}",
        f"would recover {decided.run_id}",
    ]
    assert effects() == []
    assert deuz("recover", "--older-than", "0").splitlines() == [
        f"recovered {stalled.run_id}: completed",
        f"recovered {decided.run_id}: completed",
    ]
    assert sorted(effects()) == ["echo:hi", "send_email:ann@example.com"]


def test_prune_deletes_old_completed_runs_and_old_journals(ann: Any) -> None:
    def completed(days_ago: float) -> Run:
        run = services.start_run(agent="scripted", messages=PROMPT)
        services.resume_run(run.run_id)
        Run.objects.filter(pk=run.pk).update(
            updated_at=timezone.now() - timedelta(days=days_ago)
        )
        return run

    old, middle, recent = completed(40), completed(10), completed(1)
    waiting = suspended(owner=ann)
    Run.objects.filter(pk=waiting.pk).update(
        updated_at=timezone.now() - timedelta(days=90)
    )
    assert StreamEntry.objects.filter(run=middle).exists()
    out = deuz("prune", "--completed-before", "30", "--dry-run")
    assert out.strip() == (
        "would delete 1 completed run(s) and the stream journals of 1 older run(s)"
    )
    assert Run.objects.filter(pk=old.pk).exists()
    deuz("prune", "--completed-before", "30")
    assert set(Run.objects.values_list("pk", flat=True)) == {
        middle.pk,
        recent.pk,
        waiting.pk,
    }
    assert not StreamEntry.objects.filter(
        run=middle
    ).exists()  # past retention (7 days)
    assert StreamEntry.objects.filter(run=recent).exists()
    assert middle.messages.exists()


@pytest.mark.django_db(transaction=True)
def test_the_command_runs_in_a_real_process_with_exit_codes(ann: Any) -> None:
    run = suspended(owner=ann)
    listed = run_manage("deuz", "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["runId"] == run.run_id
    missing = run_manage("deuz", "show", "no-such-run")
    assert missing.returncode == 1
    assert "No run 'no-such-run'." in missing.stderr
    bad = run_manage("deuz", "resume", run.run_id, "--approve", "e1", "--deny", "e1")
    assert bad.returncode == 2
    usage = run_manage("deuz", "prune")
    assert usage.returncode == 2
    assert "--completed-before" in usage.stderr
