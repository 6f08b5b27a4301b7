"""DjangoSessionStore: the shared store contract, and the delta writes that keep a save's
cost flat as the history grows (DESIGN §4, §6)."""

from __future__ import annotations

import itertools
import json
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import IntegrityError, OperationalError, connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deuz_django.approvals.asking import record_suspension
from deuz_django.core import Message, ToolResultPart, ToolUsePart
from deuz_django.core.approvals import ToolApprovalRequest
from deuz_django.core.durable.codec import deserialize_checkpoint, serialize_checkpoint
from deuz_django.core.testing.contracts import SessionStoreContract, make_checkpoint
from deuz_django.models import Approval, Run, RunMessage, StreamJournalEntry
from deuz_django.storage.leases import acquire
from deuz_django.storage.store import DjangoSessionStore

WRITE = re.compile(r'\b(INSERT INTO|UPDATE|DELETE FROM)\s+"?(\w+)"?', re.IGNORECASE)
SETS = re.compile(r'UPDATE "deuz_django_run" SET (.*?) WHERE')


class AwaitedDjangoSessionStore(DjangoSessionStore):
    """The contract calls ``save``/``load``/``delete``/``list`` and awaits what they
    return; Django's ORM may not run on the event loop's thread, so here each returns its
    thread-run twin (the loop calls ``asave``/``aload``, which are the same)."""

    def save(self, checkpoint: Any) -> Any:  # type: ignore[override]
        return sync_to_async(DjangoSessionStore.save)(self, checkpoint)

    def load(self, run_id: str) -> Any:  # type: ignore[override]
        return sync_to_async(DjangoSessionStore.load)(self, run_id)

    def delete(self, run_id: str) -> Any:  # type: ignore[override]
        return sync_to_async(DjangoSessionStore.delete)(self, run_id)

    def list(self) -> Any:  # type: ignore[override]
        return sync_to_async(DjangoSessionStore.list)(self)

    asave, aload, adelete, alist = save, load, delete, list


@pytest.mark.django_db(transaction=True)
class TestDjangoSessionStore(SessionStoreContract):
    @pytest.fixture
    async def store(self) -> Any:
        yield AwaitedDjangoSessionStore()
        # The worker thread's connection, which the test database must not outlive.
        await sync_to_async(connections.close_all)()


def turn(step: int) -> tuple[Message, Message]:
    """One step's worth of history: a tool call and its ~1 KB result."""
    call_id = f"call_{step}"
    return (
        Message("assistant", (ToolUsePart(call_id, "lookup", {"step": step}),)),
        Message("tool", (ToolResultPart(call_id, "x" * 1000),)),
    )


def histories(steps: int) -> Iterator[tuple[int, tuple[Message, ...]]]:
    """The growing history of a run, one step at a time, sharing its prefix objects."""
    history: tuple[Message, ...] = (Message("user", "Go."),)
    for step in range(1, steps + 1):
        history = (*history, *turn(step))
        yield step, history


def writes(queries: CaptureQueriesContext) -> list[tuple[str, str]]:
    """The writes a save issued, as (verb, table), those of a CTE included."""
    return [
        (verb.split()[0].upper(), table)
        for query in queries.captured_queries
        for verb, table in WRITE.findall(query["sql"])
    ]


def row_ids() -> dict[int, int]:
    return dict(RunMessage.objects.values_list("index", "pk"))


@pytest.mark.django_db
def test_a_save_writes_the_run_row_and_only_the_new_messages_at_any_length() -> None:
    store = DjangoSessionStore()
    seen: dict[int, list[tuple[str, str]]] = {}
    for step, history in histories(120):
        before = row_ids()
        with CaptureQueriesContext(connection) as queries:
            store.save(make_checkpoint("run-delta", step, messages=history))
        after = row_ids()
        if step in (10, 120):
            seen[step] = writes(queries)
            # PostgreSQL: one statement; SQLite: savepoint, update, insert, release.
            one_statement = connection.vendor == "postgresql"
            assert len(queries.captured_queries) == (1 if one_statement else 4)
        if step > 1:
            # The stored prefix is untouched: no row was rewritten, two were added.
            assert {i: after[i] for i in before} == before
            assert len(after) - len(before) == 2
    assert (
        seen[10]
        == seen[120]
        == [
            ("UPDATE", "deuz_django_run"),
            ("INSERT", "deuz_django_runmessage"),
        ]
    )


def round_trips(write: Callable[[], object]) -> int:
    """Request/response cycles ``write`` makes on PostgreSQL, from libpq's trace: one
    each time the traffic turns from the client's messages to the server's."""
    from psycopg.pq import Trace  # the postgres extra

    raw = connection.connection
    with tempfile.TemporaryFile() as trace:
        raw.pgconn.trace(trace.fileno())
        raw.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)
        try:
            write()
        finally:
            raw.pgconn.untrace()
        trace.seek(0)
        directions = [line[:1] for line in trace.read().decode().splitlines()]
    return sum(
        1
        for before, now in itertools.pairwise(directions)
        if (before, now) == ("F", "B")
    )


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="round trips over the network"
)
@pytest.mark.django_db(transaction=True)
def test_a_save_under_a_lease_is_one_round_trip_once_prepared() -> None:
    """Checkpoint and new messages in one round trip (issue #14 item 4): the run row's
    conditional update and the messages' insert are one prepared statement."""
    Run.objects.create(run_id="run-rt", agent="demo")
    store = DjangoSessionStore(lease=acquire("run-rt"))
    counted = []
    for step, history in histories(4):
        checkpoint = make_checkpoint("run-rt", step, messages=history)
        counted.append(round_trips(partial(store.save, checkpoint)))
    # The first save reads the stored history; the first append also prepares its
    # statement on this connection (one more round trip, once).
    assert counted[2:] == [1, 1]


@pytest.mark.django_db(transaction=True)
def test_an_append_whose_messages_cannot_be_written_leaves_the_run_as_it_was() -> None:
    """The append's run row and new messages commit together or not at all (one
    statement on PostgreSQL, ``BEGIN IMMEDIATE`` … ``COMMIT`` on SQLite), outside any
    enclosing transaction as a leg runs."""
    store = DjangoSessionStore()
    steps = dict(histories(2))
    store.save(make_checkpoint("run-torn", 1, messages=steps[1]))

    def refuse_messages(
        execute: Any, sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        if 'INSERT INTO "deuz_django_runmessage"' in sql:
            raise OperationalError("disk full")
        return execute(sql, params, many, context)

    with (
        connection.execute_wrapper(refuse_messages),
        pytest.raises(OperationalError, match="disk full"),
    ):
        store.save(make_checkpoint("run-torn", 2, messages=steps[2]))
    run = Run.objects.get(run_id="run-torn")
    assert (run.step_index, run.message_count) == (1, len(steps[1]))
    assert RunMessage.objects.filter(run=run).count() == len(steps[1])
    assert not connection.in_atomic_block
    store.save(make_checkpoint("run-torn", 2, messages=steps[2]))  # usable again
    assert RunMessage.objects.filter(run=run).count() == len(steps[2])


@pytest.mark.django_db(transaction=True)
def test_an_append_refused_by_a_constraint_leaves_the_run_as_it_was() -> None:
    """The same on SQLite's own cursor (nothing watches the statements here): a stray
    row where the append's last message goes makes its INSERT fail after the run row's
    UPDATE ran, and the UPDATE is rolled back with it."""
    store = DjangoSessionStore()
    steps = dict(histories(2))
    store.save(make_checkpoint("run-torn", 1, messages=steps[1]))
    run = Run.objects.get(run_id="run-torn")
    stray = RunMessage.objects.create(
        run=run, index=len(steps[2]) - 1, role="user", data="{}", digest=""
    )
    with pytest.raises(IntegrityError):
        store.save(make_checkpoint("run-torn", 2, messages=steps[2]))
    run.refresh_from_db()
    assert (run.step_index, run.message_count) == (1, len(steps[1]))
    stored = RunMessage.objects.filter(run=run).values_list("index", flat=True)
    assert sorted(stored) == [*range(len(steps[1])), stray.index]
    assert not connection.in_atomic_block
    stray.delete()
    store.save(make_checkpoint("run-torn", 2, messages=steps[2]))  # usable again
    assert RunMessage.objects.filter(run=run).count() == len(steps[2])


@pytest.mark.django_db
def test_a_rewritten_history_is_rewritten_from_the_first_changed_message() -> None:
    # prepare_step may edit earlier messages: everything from the first change is rewritten.
    store = DjangoSessionStore()
    *_, (_, history) = histories(5)
    store.save(make_checkpoint("run-edit", 5, messages=history))
    before = row_ids()
    edited = (*history[:3], Message("tool", "summarised"), *history[4:], *turn(6))
    with CaptureQueriesContext(connection) as queries:
        store.save(make_checkpoint("run-edit", 6, messages=edited))
    after = row_ids()
    assert writes(queries) == [
        ("UPDATE", "deuz_django_run"),
        ("DELETE", "deuz_django_runmessage"),
        ("INSERT", "deuz_django_runmessage"),
    ]
    assert {i: after[i] for i in range(3)} == {i: before[i] for i in range(3)}
    assert all(after[i] != before[i] for i in range(3, len(history)))
    loaded = DjangoSessionStore().load("run-edit")
    assert loaded is not None
    assert loaded.messages == edited


@pytest.mark.django_db
def test_a_shorter_history_drops_the_stored_tail() -> None:
    store = DjangoSessionStore()
    *_, (_, history) = histories(4)
    store.save(make_checkpoint("run-short", 4, messages=history))
    store.save(make_checkpoint("run-short", 5, messages=history[:3]))
    assert RunMessage.objects.count() == 3
    loaded = DjangoSessionStore().load("run-short")
    assert loaded is not None
    assert loaded.messages == history[:3]


@pytest.mark.django_db
def test_a_store_without_memory_of_the_run_finds_the_unchanged_prefix_by_digest() -> (
    None
):
    # Another process (or a fresh store) saves the next step: only the new rows are written.
    *_, (_, history) = histories(3)
    DjangoSessionStore().save(make_checkpoint("run-fresh", 3, messages=history))
    before = row_ids()
    longer = (*history, *turn(4))
    with CaptureQueriesContext(connection) as queries:
        DjangoSessionStore().save(make_checkpoint("run-fresh", 4, messages=longer))
    after = row_ids()
    assert {i: after[i] for i in before} == before
    assert len(after) == len(longer)
    assert ("DELETE", "deuz_django_runmessage") not in writes(queries)


@pytest.mark.django_db
def test_a_store_notices_that_another_writer_changed_the_run() -> None:
    # The remembered history is trusted only while the row's message count agrees.
    mine, theirs = DjangoSessionStore(), DjangoSessionStore()
    *_, (_, history) = histories(2)
    mine.save(make_checkpoint("run-shared", 2, messages=history))
    theirs.load("run-shared")
    other = (*history, Message("user", "from elsewhere"))
    theirs.save(make_checkpoint("run-shared", 3, messages=other))
    final = (*history, *turn(3))
    mine.save(make_checkpoint("run-shared", 4, messages=final))
    loaded = DjangoSessionStore().load("run-shared")
    assert loaded is not None
    assert loaded.messages == final


@pytest.mark.django_db
def test_a_store_notices_another_writer_even_at_the_same_history_length() -> None:
    mine, theirs = DjangoSessionStore(), DjangoSessionStore()
    *_, (_, history) = histories(2)
    mine.save(make_checkpoint("run-same", 2, messages=history))
    theirs.load("run-same")
    rewritten = (*history[:-1], Message("tool", "theirs"))
    theirs.save(make_checkpoint("run-same", 3, messages=rewritten))
    final = (*history, *turn(3))
    mine.save(make_checkpoint("run-same", 4, messages=final))
    loaded = DjangoSessionStore().load("run-same")
    assert loaded is not None
    assert loaded.messages == final


@pytest.mark.django_db
def test_an_append_sets_the_status_only_when_it_changes() -> None:
    """SQLite rewrites an indexed column's index entries even when it is set to the
    value it holds, so an append that keeps the status leaves it out of its ``UPDATE``;
    a status another writer changed meanwhile is still overwritten, by the ORM's
    path."""

    def save(step: int, history: tuple[Message, ...], status: Any) -> list[str]:
        """The columns the save's ``UPDATE`` of the run row set."""
        checkpoint = make_checkpoint(
            "run-status", step, messages=history, status=status
        )
        with CaptureQueriesContext(connection) as queries:
            store.save(checkpoint)
        return [
            assignments
            for query in queries.captured_queries
            for assignments in SETS.findall(query["sql"])
        ]

    store = DjangoSessionStore()
    steps = histories(5)
    for step, history in itertools.islice(steps, 2):
        save(step, history, "running")
    [kept] = save(*next(steps), "running")
    assert '"status"' not in kept
    Run.objects.filter(run_id="run-status").update(status="failed")
    save(*next(steps), "running")
    assert Run.objects.get(run_id="run-status").status == "running"
    [changed] = save(*next(steps), "completed")
    assert '"status"' in changed
    assert Run.objects.get(run_id="run-status").status == "completed"


@pytest.mark.django_db
def test_saving_a_run_deleted_meanwhile_recreates_it() -> None:
    store = DjangoSessionStore()
    store.save(make_checkpoint("run-again"))
    DjangoSessionStore().delete("run-again")
    store.save(make_checkpoint("run-again", 2))
    loaded = DjangoSessionStore().load("run-again")
    assert loaded is not None
    assert loaded.step_index == 2


@pytest.mark.django_db
def test_a_sub_millisecond_checkpoint_time_round_trips() -> None:
    # Deps.clock may return fractional milliseconds; the row keeps them.
    precise = replace(make_checkpoint("run-clock"), created_at=1_700_000_000_123.25)
    DjangoSessionStore().save(precise)
    loaded = DjangoSessionStore().load("run-clock")
    assert loaded is not None
    assert loaded.to_json() == precise.to_json()


@pytest.mark.django_db
def test_messages_and_usage_keep_what_they_were_read_with() -> None:
    # docs/interop.md rule 4: a newer reference's message key and usage counter survive
    # the tables, as the message rows and the usage column hold what was read.
    text = serialize_checkpoint(make_checkpoint("run-newer"))
    data = json.loads(text)
    data["messages"][0]["name"] = "bob"
    data["usage"]["videoTokens"] = 4
    read = deserialize_checkpoint(json.dumps(data))
    DjangoSessionStore().save(read)
    loaded = DjangoSessionStore().load("run-newer")
    assert loaded is not None
    written = json.loads(serialize_checkpoint(loaded))
    assert written["messages"][0]["name"] == "bob"
    assert written["usage"]["videoTokens"] == 4


def pending(run_id: str, *ids: str) -> tuple[ToolApprovalRequest, ...]:
    return tuple(
        ToolApprovalRequest(
            approval_id=i, tool_call_id=i, tool_name="pay", input={"usd": 1}, token="t"
        )
        for i in ids
    )


@pytest.mark.django_db
def test_a_suspended_root_checkpoint_records_one_approval_row_per_pending_call() -> (
    None
):
    """Per ask: saving the same suspended boundary again keeps its rows; a child's
    checkpoint records none (its calls are asked through its root's)."""
    store = DjangoSessionStore(on_suspended=record_suspension)
    for _ in range(2):
        store.save(
            make_checkpoint(
                "run-gate",
                1,
                status="suspended",
                pending_approvals=pending("run-gate", "a1", "a2"),
            )
        )
    store.save(
        make_checkpoint(
            "run-gate::helper#c1",
            1,
            status="suspended",
            pending_approvals=pending("run-gate", "a3"),
        )
    )
    rows = Approval.objects.order_by("approval_id")
    assert [(a.run.run_id, a.approval_id, a.step_index, a.status) for a in rows] == [
        ("run-gate", "a1", 1, "pending"),
        ("run-gate", "a2", 1, "pending"),
    ]


@pytest.mark.django_db
def test_a_call_asked_again_at_a_later_boundary_gets_a_row_of_its_own() -> None:
    """A model that re-uses a call id asks anew: the earlier ask's verdict is history."""
    store = DjangoSessionStore(on_suspended=record_suspension)
    for step in (1, 2):
        store.save(
            make_checkpoint(
                "run-again",
                step,
                status="suspended",
                pending_approvals=pending("run-again", "a1"),
            )
        )
        Approval.objects.filter(step_index=step).update(
            status="approved", decided_at=timezone.now()
        )
    rows = Approval.objects.order_by("step_index")
    assert [(a.approval_id, a.step_index) for a in rows] == [("a1", 1), ("a1", 2)]


@pytest.mark.django_db
def test_deleting_a_run_removes_its_history_approvals_journal_and_children() -> None:
    store = DjangoSessionStore()
    store.save(
        make_checkpoint(
            "run-del", status="suspended", pending_approvals=pending("run-del", "a1")
        )
    )
    store.save(make_checkpoint("run-del::helper#c1"))
    store.save(make_checkpoint("run-del::helper#c1::deeper#c2"))
    store.save(make_checkpoint("run-kept"))
    StreamJournalEntry.objects.create(
        run=Run.objects.get(run_id="run-del"), seq=0, part="{}"
    )
    child = Run.objects.get(run_id="run-del::helper#c1")
    assert child.parent is not None
    assert child.parent.run_id == "run-del"
    store.delete("run-del")
    assert list(Run.objects.values_list("run_id", flat=True)) == ["run-kept"]
    assert RunMessage.objects.filter(run__run_id="run-kept").count() == 1
    assert RunMessage.objects.count() == 1
    assert not Approval.objects.exists()
    assert not StreamJournalEntry.objects.exists()


@pytest.mark.django_db
def test_a_sub_agent_run_inherits_its_parents_agent_and_owner(make_user: Any) -> None:
    owner = make_user("ann")
    Run.objects.create(run_id="run-own", agent="nested", owner=owner)
    DjangoSessionStore().save(make_checkpoint("run-own::researcher#p1"))
    child = Run.objects.get(run_id="run-own::researcher#p1")
    assert (child.agent, child.owner, child.parent_id) == (
        "nested",
        owner,
        Run.objects.get(run_id="run-own").pk,
    )


@pytest.mark.django_db
def test_a_store_alone_keeps_checkpoints_and_asks_nobody() -> None:
    """Storage sits below the approval layer: what a suspension asks of people is
    recorded only through the hook a leg supplies."""
    DjangoSessionStore().save(
        make_checkpoint(
            "run-bare",
            1,
            status="suspended",
            pending_approvals=pending("run-bare", "a1"),
        )
    )
    assert Run.objects.get(run_id="run-bare").status == "suspended"
    assert not Approval.objects.exists()
