"""A run is one trace (deuz_django.core.tracing): its first leg stores the trace context
on the run, a leg resumed in another process and a leg recovered after a SIGKILL join it,
and each verdict adds an ``await_approval`` span with its latency and its decider.

Spans of this process are kept in memory; a ``manage.py`` subprocess writes its spans as
JSON lines (``DEUZ_TEST_SPAN_FILE``, tests/spans.py).
"""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone

from deuz_django import services
from deuz_django.models import Approval, Run, StandingRule
from tests.api.support import started
from tests.django.processes import run_manage, start_manage, wait_until
from tests.django.run_support import PROMPT
from tests.spans import Recorded, SpanRecord, named, one, read_span_file, recording

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorded]:
    with recording(monkeypatch) as recorded:
        yield recorded


def _ids(traceparent: str) -> tuple[str, str]:
    _version, trace_id, span_id, _flags = traceparent.split("-")
    return trace_id, span_id


def _ns(moment: datetime | None) -> int:
    assert moment is not None
    return int(moment.timestamp() * 1e6) * 1000


def test_a_run_is_one_trace_across_a_suspend_a_resume_elsewhere_and_its_verdicts(
    spans: Recorded, make_user: Callable[..., User], tmp_path: Path
) -> None:
    ann = make_user("ann")
    run = started(ann)  # leg 1 here: suspended on r1 (refund) and e1 (send_email)
    assert run.status == "suspended"
    trace_id, first_leg_id = _ids(run.trace_context)
    first = one(spans.spans(), "invoke_agent gated")
    assert (first.trace_id, first.span_id) == (trace_id, first_leg_id)
    assert first.attributes["deuz.run.status"] == "suspended"

    services.decide_approval(
        Approval.objects.get(run=run, approval_id="e1"), user=ann, approved=True
    )
    span_file = tmp_path / "spans.jsonl"
    done = run_manage(
        "deuz",
        "resume",
        run.run_id,
        "--deny",
        "r1",
        "--reason",
        "Not this order.",
        "--operator",
        "ops",
        DEUZ_TEST_SPAN_FILE=str(span_file),
    )
    assert done.returncode == 0, done.stderr
    run.refresh_from_db()
    assert run.status == "completed"

    here, there = spans.spans(), read_span_file(span_file)
    assert {s.trace_id for s in [*here, *there]} == {trace_id}
    second = one(there, "invoke_agent gated")
    assert second.parent_id == first_leg_id
    assert second.attributes["deuz.leg.resumed"] is True
    assert second.attributes["deuz.run.status"] == "completed"
    # The approved call runs as the resumed leg settles, before its first step.
    email = one(there, "execute_tool send_email")
    assert email.parent_id == second.span_id
    assert one(there, "execute_tool refund").status == "ERROR"  # denied
    for step in named(there, "step"):
        assert step.parent_id == second.span_id
    chats = [s for s in there if s.name.startswith("chat ")]
    assert chats
    assert all(c.attributes["gen_ai.operation.name"] == "chat" for c in chats)
    assert all("gen_ai.usage.input_tokens" in c.attributes for c in chats)

    by_ann = one(here, "await_approval send_email")
    approval = Approval.objects.get(run=run, approval_id="e1")
    assert by_ann.parent_id == first_leg_id
    assert (by_ann.start_ns, by_ann.end_ns) == (
        _ns(approval.created_at),
        _ns(approval.decided_at),
    )
    assert by_ann.attributes["deuz.approval.latency_ms"] == pytest.approx(
        (approval.decided_at - approval.created_at).total_seconds() * 1000, abs=0.01
    )
    assert by_ann.attributes["deuz.approval.approved"] is True
    assert by_ann.attributes["deuz.approval.decider.kind"] == "user"
    assert by_ann.attributes["deuz.approval.decider.user.name"] == "ann"
    assert by_ann.attributes["deuz.approval.decider.user.id"] == str(ann.pk)
    by_ops = one(there, "await_approval refund")
    assert by_ops.attributes["deuz.approval.status"] == "denied"
    assert by_ops.attributes["deuz.approval.decider.operator"] == "ops"
    assert by_ops.attributes["deuz.approval.reason"] == "Not this order."


def _lease_lapsed(run: Run) -> bool:
    run.refresh_from_db()
    return run.lease_expires_at is not None and run.lease_expires_at < timezone.now()


def test_a_leg_recovered_after_a_sigkill_joins_the_trace_of_the_killed_leg(
    spans: Recorded,
    effects: Callable[[], list[str]],
    tmp_path: Path,
) -> None:
    run = services.start_run(agent="slow", messages=PROMPT)
    span_file = tmp_path / "spans.jsonl"
    leg = start_manage(
        "deuz",
        "resume",
        run.run_id,
        DEUZ_LEASE_SECONDS="1",
        DEUZ_TEST_SLOW_STEP="2",
        DEUZ_TEST_SLOW_SECONDS="60",
        DEUZ_TEST_SPAN_FILE=str(span_file),
    )
    try:
        wait_until(lambda: "slow:2:start" in effects(), "the leg to reach step 2")
    finally:
        os.kill(leg.pid, signal.SIGKILL)
        leg.communicate()
    run.refresh_from_db()
    trace_id, killed_leg_id = _ids(run.trace_context)
    killed: list[SpanRecord] = read_span_file(span_file)
    # The killed leg's span never ended; what finished before the kill is its children.
    assert named(killed, "invoke_agent slow") == []
    assert [s.attributes["deuz.step.index"] for s in named(killed, "step")] == [0]
    assert one(killed, "step").parent_id == killed_leg_id

    wait_until(lambda: _lease_lapsed(run), "the dead leg's lease to lapse")
    out = io.StringIO()
    call_command("deuz", "recover", "--older-than", "0", stdout=out)
    # The killed call is in doubt (``slow`` is not idempotent): the recovered leg asks a
    # person instead of running it again.
    assert out.getvalue().strip() == f"recovered {run.run_id}: suspended"

    recovered = spans.spans()
    assert {s.trace_id for s in [*killed, *recovered]} == {trace_id}
    leg_span = one(recovered, "invoke_agent slow")
    assert leg_span.parent_id == killed_leg_id
    assert leg_span.attributes["deuz.run.status"] == "suspended"
    assert named(recovered, "step")[0].attributes["deuz.step.index"] == 1


def test_an_automatic_decision_names_its_rule_on_the_await_approval_span(
    spans: Recorded, make_user: Callable[..., User]
) -> None:
    ann = make_user("ann")
    rule = StandingRule.objects.create(
        tool_name="send_email", action="approve", reason="Fine.", created_by=ann
    )

    run = started(ann)

    waited = one(spans.spans(), "await_approval send_email")
    assert waited.attributes["deuz.approval.decider.kind"] == "rule"
    assert waited.attributes["deuz.approval.decider.rule.id"] == str(rule.pk)
    assert waited.attributes["deuz.approval.reason"] == "Fine."
    assert waited.trace_id == _ids(run.trace_context)[0]
