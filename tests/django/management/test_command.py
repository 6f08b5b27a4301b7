"""``manage.py deuz``: runs, show, resume, recover, prune — output and exit codes."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from deuz_django import services
from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.management.commands.deuz import NO_DECIDER
from deuz_django.models import Approval, Run, StreamJournalEntry
from deuz_django.storage import leases
from tests.django.admin_support import APPROVER, DECIDER
from tests.django.agents import TOOL_PERMISSION
from tests.django.processes import MANAGE, manage_env, run_manage
from tests.django.run_support import (
    PROMPT,
    approval,
    let_time_pass,
    suspended,
    tool_results,
)

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


def table(out: str) -> list[dict[str, str]]:
    """The rows of a printed table, by column name (cells may hold spaces)."""
    header, rule, *lines = out.splitlines()
    starts = [
        i for i, c in enumerate(rule) if c == "-" and (i == 0 or rule[i - 1] == " ")
    ]
    names = [
        header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)
    ]
    return [
        {
            name: line[a:b].strip()
            for name, a, b in zip(names, starts, [*starts[1:], None], strict=True)
        }
        for line in lines
    ]


def test_runs_lists_root_runs_with_title_and_owner_and_filters_them(ann: Any) -> None:
    assert deuz("runs").strip() == "No runs."
    waiting = suspended(owner=ann)
    done = services.start_run(
        agent="scripted",
        messages=PROMPT,
        title="A title much longer than forty characters",
    )
    services.resume_run(done.run_id)
    out = deuz("runs")
    assert out.splitlines()[0].split() == [
        "RUN",
        "TITLE",
        "AGENT",
        "OWNER",
        "STATUS",
        "STEPS",
        "TOKENS",
        "PENDING",
        "UPDATED",
    ]
    rows = {row.pop("RUN"): row for row in table(out)}
    assert {run_id: list(row.values())[:7] for run_id, row in rows.items()} == {
        waiting.run_id: [
            "Refund order A-1 and email Ann.",
            "gated",
            "ann",
            "suspended",
            "1",
            "15",
            "2",
        ],
        done.run_id: [
            "A title much longer than forty characte…",
            "scripted",
            "-",
            "completed",
            "2",
            "41",
            "0",
        ],
    }
    # Times carry their UTC offset (the project's time zone is UTC).
    assert rows[done.run_id]["UPDATED"].endswith("+00:00")
    only = deuz("runs", "--status", "suspended", "--agent", "gated", "--owner", "ann")
    assert [row["RUN"] for row in table(only)] == [waiting.run_id]
    assert deuz("runs", "--owner", "nobody").strip() == "No runs."


def test_runs_json_prints_one_object_per_line_with_title_owner_and_zoned_times(
    ann: Any,
) -> None:
    run = suspended(owner=ann)
    services.resume_run(services.start_run(agent="scripted", messages=PROMPT).run_id)
    lines = deuz("runs", "--json").splitlines()
    assert len(lines) == 2
    data = json.loads(next(line for line in lines if run.run_id in line))
    assert data["runId"] == run.run_id
    assert (data["title"], data["agent"], data["owner"], data["status"]) == (
        "Refund order A-1 and email Ann.",
        "gated",
        "ann",
        "suspended",
    )
    assert (data["stepIndex"], data["pendingApprovals"]) == (1, 2)
    assert data["usage"]["totalTokens"] == 15
    assert data["updatedAt"].endswith("+00:00")


def test_show_prints_the_title_transcript_sub_agents_and_approvals(ann: Any) -> None:
    run = suspended(owner=ann)
    services.decide_approval(
        approval(run, "send_email"), user=ann, approved=False, reason="Not now."
    )
    out = deuz("show", run.run_id)
    assert f"Run {run.run_id}  agent=gated  status=suspended" in out
    assert "Title Refund order A-1 and email Ann." in out
    assert "[user] text: Refund order A-1 and email Ann." in out
    assert "[assistant] tool-call refund (r1):" in out
    rows = {row["APPROVAL"]: row for row in table(out.split("Approvals:\n")[1])}
    assert rows["e1"]["STATUS"] == "denied"
    assert rows["e1"]["DECIDED BY"] == "ann"
    assert rows["e1"]["DECIDED AT"].endswith("+00:00")
    assert rows["e1"]["REASON"] == "Not now."
    assert (rows["r1"]["STATUS"], rows["r1"]["DECIDED BY"]) == ("pending", "-")


def test_show_prints_a_sub_agents_transcript_under_its_path(ann: Any) -> None:
    run = suspended(agent="nested", owner=ann)
    child = Run.objects.get(parent=run)

    out = deuz("show", run.run_id)

    root, sub = out.split(f"Sub-agent researcher  ({child.run_id}, suspended)\n")
    assert "[assistant] tool-call researcher (p1):" in root
    assert '    [assistant] tool-call send_email (x1): {\n          "to"' in sub


def test_resume_as_a_user_who_may_decide_records_their_name(
    ann: Any, make_user: Callable[..., Any], effects: Any
) -> None:
    run = suspended(owner=ann)
    make_user("fin", *APPROVER, staff=True)
    out = deuz(
        "resume",
        run.run_id,
        "--approve",
        "r1",
        "--deny",
        "e1",
        "--reason",
        "Later.",
        "--as",
        "fin",
    )
    assert out.strip() == f"Run {run.run_id}: completed"
    assert effects() == ["refund:A-1"]
    refund, email = approval(run, "refund"), approval(run, "send_email")
    assert (refund.status, refund.decided_by.username, refund.operator) == (
        "approved",
        "fin",
        "",
    )
    assert (email.status, email.decided_by.username, email.reason) == (
        "denied",
        "fin",
        "Later.",
    )
    assert tool_results(run)["e1"] == ("Tool call denied. Reason: Later.", True)


def test_resume_as_a_user_who_may_not_decide_is_refused_and_records_nothing(
    ann: Any, make_user: Callable[..., Any]
) -> None:
    run = suspended(owner=ann)
    make_user("clerk", *DECIDER, staff=True)  # lacks the refund tool's permission
    make_user("bob")  # may not even see ann's run

    error = fails(
        "resume", run.run_id, "--approve", "e1", "--approve", "r1", "--as", "clerk"
    )
    assert error.returncode == 3
    assert str(error) == (
        f"clerk may not approve refund (r1): Deciding refund calls needs the "
        f"'{TOOL_PERMISSION}' permission. Nothing was recorded."
    )
    assert {a.status for a in run.approvals.all()} == {"pending"}  # e1 too
    error = fails("resume", run.run_id, "--deny", "e1", "--as", "bob")
    assert (error.returncode, str(error)) == (
        3,
        f"bob may not see run '{run.run_id}'. Nothing was recorded.",
    )
    assert {a.status for a in run.approvals.all()} == {"pending"}
    run.refresh_from_db()
    assert run.status == "suspended"


def test_the_owner_may_not_approve_their_own_refund_from_the_shell(
    make_user: Callable[..., Any],
) -> None:
    # A finance clerk's own run: they hold the refund permission, but the refund tool
    # says approval_by_owner=False (separation of duties).
    owner = make_user("finn", TOOL_PERMISSION)
    run = suspended(owner=owner)

    error = fails("resume", run.run_id, "--approve", "r1", "--as", "finn")

    assert (error.returncode, str(error)) == (
        3,
        "finn may not approve refund (r1): The run's owner may not approve their "
        "own refund call. Nothing was recorded.",
    )
    assert approval(run, "refund").is_pending
    # Denying it is the owner's to do.
    assert "completed" in deuz("resume", run.run_id, "--deny-remaining", "--as", "finn")
    assert {
        (a.status, a.decided_by.username if a.decided_by else None)
        for a in run.approvals.all()
    } == {("denied", "finn")}


def test_an_operator_override_bypasses_the_user_rules_and_is_recorded_as_such(
    ann: Any, effects: Any
) -> None:
    run = suspended(owner=ann)

    out = deuz(
        "resume",
        run.run_id,
        "--approve",
        "e1",
        "--deny",
        "r1",
        "--reason",
        "Fraud.",
        "--operator",
        "Olga on call",
    )

    assert out.strip() == f"Run {run.run_id}: completed"
    assert effects() == ["send_email:ann@example.com"]
    refund = approval(run, "refund")
    assert (refund.status, refund.reason, refund.decided_by, refund.operator) == (
        "denied",
        "Fraud.",
        None,
        "Olga on call",
    )
    assert approval(run, "send_email").operator == "Olga on call"
    rows = {
        row["APPROVAL"]: row
        for row in table(deuz("show", run.run_id).split("Approvals:\n")[1])
    }
    assert rows["r1"]["DECIDED BY"] == "Olga on call (operator override)"
    assert tool_results(run)["r1"] == ("Tool call denied. Reason: Fraud.", True)


def test_an_operator_override_still_needs_a_token_that_verifies(ann: Any) -> None:
    run = suspended(owner=ann)
    Approval.objects.filter(run=run, approval_id="e1").update(token="v1.forged.mac")

    error = fails("resume", run.run_id, "--approve", "e1", "--operator", "ops")

    assert error.returncode == 2
    assert "forged" in str(error)
    assert approval(run, "send_email").is_pending


def test_a_verdict_without_a_decider_is_refused(ann: Any) -> None:
    run = suspended(owner=ann)
    for args in (["--approve", "e1"], ["--deny", "r1"], ["--deny-remaining"]):
        error = fails("resume", run.run_id, *args)
        assert (error.returncode, str(error)) == (2, NO_DECIDER)
    error = fails("resume", run.run_id, "--approve", "e1", "--as", "zed")
    assert (error.returncode, str(error)) == (2, "No user 'zed'.")
    error = fails(
        "resume", run.run_id, "--approve", "e1", "--as", "ann", "--operator", "x"
    )
    assert error.returncode == 2
    assert "not allowed with argument" in str(error)
    assert {a.status for a in run.approvals.all()} == {"pending"}


def test_resume_that_leaves_the_run_suspended_says_what_is_pending(ann: Any) -> None:
    run = suspended(owner=ann)
    error = fails("resume", run.run_id, "--approve", "e1", "--as", "ann")
    assert error.returncode == 1
    assert "still waits for a verdict on r1" in str(error)
    assert approval(run, "send_email").status == "approved"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["resume", "RUN", "--approve", "zz", "--operator", "ops"],
            "has no approval 'zz'",
        ),
        (["resume", "RUN", "--as", "ann"], "--as and --operator go with"),
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
    services.record_operator_verdict(
        approval(decided, "send_email"), operator="ops", approved=True
    )
    services.record_operator_verdict(
        approval(decided, "refund"), operator="ops", approved=False
    )
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
    assert StreamJournalEntry.objects.filter(run=middle).exists()
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
    assert not StreamJournalEntry.objects.filter(
        run=middle
    ).exists()  # past retention (7 days)
    assert StreamJournalEntry.objects.filter(run=recent).exists()
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


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "listing", [["runs", "--json"], ["runs"]], ids=["json", "table"]
)
def test_output_ends_quietly_when_the_reader_closes_the_pipe(
    listing: list[str],
) -> None:
    # More than a pipe buffer of output, so `head` leaves while the command still writes.
    Run.objects.bulk_create(
        Run(run_id=f"run-{i:04d}", agent="scripted", title="A long title " * 5)
        for i in range(1500)
    )
    command = shlex.join(
        [sys.executable, str(MANAGE), "deuz", *listing, "--limit", "1500"]
    )
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{command} | head -n 1"],
        env=manage_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stderr == ""
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 1


def test_show_prints_each_calls_deadline_and_whom_it_escalated_to(ann: Any) -> None:
    run = suspended(agent="timed", owner=ann)
    let_time_pass(run, 4 * timedelta(hours=1) + timedelta(seconds=1))
    deadline_sweep.sweep()  # the refund escalates, the email times out
    rows = {
        row["APPROVAL"]: row
        for row in table(deuz("show", run.run_id).split("Approvals:\n")[1])
    }
    refund = approval(run, "refund")
    assert rows["r1"]["DEADLINE"] == (
        f"escalated to group:Finance leads, times out at "
        f"{timezone.localtime(refund.deadline_at).isoformat(sep=' ', timespec='seconds')}"
    )
    assert (rows["e1"]["STATUS"], rows["e1"]["DECIDED BY"]) == ("expired", "the system")
    assert rows["e1"]["REASON"] == "Timed out: nobody decided within 1 hour."


def test_resume_with_a_verdict_on_a_call_that_timed_out_records_nothing(
    ann: Any,
) -> None:
    run = suspended(agent="timed", owner=ann)
    let_time_pass(run, timedelta(hours=2))
    deadline_sweep.act_on_due()
    error = fails("resume", run.run_id, "--approve", "e1", "--as", "ann")
    assert error.returncode == 1
    assert "was already expired" in str(error)
    assert approval(run, "send_email").decided_by is None
