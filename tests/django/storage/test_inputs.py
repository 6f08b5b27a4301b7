"""DjangoInputQueue: the shared input-queue contract with DjangoSessionStore, who sent
each input, the step it was delivered at, and inputs racing a completing save."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import DatabaseError, connection, connections

from deuz_django.core import Message
from deuz_django.core.durable import InputArrived, RunCompletedError
from deuz_django.core.testing.contracts import InputQueueContract, make_checkpoint
from deuz_django.models import Run, RunInput
from deuz_django.storage.inputs import DjangoInputQueue
from deuz_django.storage.store import DjangoSessionStore

from .test_store import AwaitedDjangoSessionStore

RUN = "steered"


@pytest.mark.django_db(transaction=True)
class TestDjangoInputQueue(InputQueueContract):
    @pytest.fixture
    async def store(self) -> Any:
        yield AwaitedDjangoSessionStore()
        await sync_to_async(connections.close_all)()


def started(status: str = "running") -> DjangoSessionStore:
    store = DjangoSessionStore()
    store.save(make_checkpoint(RUN, 1, status=status))  # type: ignore[arg-type]
    return store


@pytest.mark.django_db
def test_an_input_records_who_sent_it(make_user: Any) -> None:
    store = started()
    alice = make_user("alice")
    store.input_queue.put(RUN, "From Alice.", user=alice)
    store.input_queue.put(RUN, "From the shell.", operator="ops")
    rows = list(RunInput.objects.order_by("seq"))
    assert [row.sender for row in rows] == ["alice", "ops (operator)"]
    assert Run.objects.get(run_id=RUN).input_seq == 2


@pytest.mark.django_db
def test_a_delivered_input_keeps_the_step_whose_model_call_saw_it() -> None:
    store = started()
    queued = store.input_queue.put(RUN, "Shorter, please.")
    history = (Message("user", "step 1"), queued.message(), Message("assistant", "OK"))
    store.save(make_checkpoint(RUN, 2, messages=history))
    row = RunInput.objects.get()
    assert (row.delivered_at_step, row.delivered_at is not None) == (1, True)
    assert store.input_queue.pending(RUN) == ()


@pytest.mark.django_db
def test_a_stopped_run_refuses_input() -> None:
    started()
    Run.objects.filter(run_id=RUN).update(status="stopped")
    with pytest.raises(RunCompletedError):
        DjangoInputQueue().put(RUN, "Anyone there?")
    assert not RunInput.objects.exists()


@pytest.mark.django_db
def test_a_refused_completion_writes_nothing() -> None:
    store = started()
    store.input_queue.put(RUN, "Wait!")
    done = (Message("user", "step 1"), Message("assistant", "Bye."))
    with pytest.raises(InputArrived):
        store.save(make_checkpoint(RUN, 2, status="completed", messages=done))
    run = Run.objects.get(run_id=RUN)
    assert (run.status, run.step_index, run.message_count) == ("running", 1, 1)
    # The store remembers the stored history, not the refused one: it saves on.
    store.save(make_checkpoint(RUN, 2, messages=done))
    assert Run.objects.get(run_id=RUN).message_count == 2


def race(run_id: str) -> tuple[str, str]:
    """One thread completes ``run_id`` as another puts an input; how each went."""
    store = DjangoSessionStore()
    store.save(make_checkpoint(run_id, 1))
    done = (Message("user", "step 1"), Message("assistant", "Bye."))
    results: dict[str, str] = {}
    barrier = threading.Barrier(2)

    def complete() -> None:
        barrier.wait()
        try:
            store.save(make_checkpoint(run_id, 2, status="completed", messages=done))
            results["complete"] = "saved"
        except InputArrived:
            results["complete"] = "refused"
        finally:
            connections.close_all()

    def put() -> None:
        barrier.wait()
        try:
            DjangoInputQueue().put(run_id, "One more thing.")
            results["put"] = "accepted"
        except RunCompletedError:
            results["put"] = "refused"
        finally:
            connections.close_all()

    threads = [threading.Thread(target=complete), threading.Thread(target=put)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results["complete"], results["put"]


@pytest.mark.django_db(transaction=True)
def test_inputs_racing_a_completion_are_refused_or_seen_never_lost() -> None:
    """Either the put is refused (the run completed first) or the completion is (it
    would have left the input unanswered)."""
    for round_ in range(12):
        run_id = f"race-{round_}"
        outcome = race(run_id)
        assert outcome in {("saved", "refused"), ("refused", "accepted")}
        status = Run.objects.get(run_id=run_id).status
        pending = RunInput.objects.filter(run__run_id=run_id).count()
        assert (status, pending) in {("completed", 0), ("running", 1)}


@pytest.mark.django_db(transaction=True)
def test_a_read_on_a_connection_the_server_ended_is_made_again_on_a_new_one() -> None:
    """A failover or an admin's pg_terminate_backend between two steps: the boundary's
    read discards the dead connection and finds the input on a new one."""
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's")
    store = started()
    queued = store.input_queue.put(RUN, "Also check the invoices.")
    with pytest.raises(DatabaseError), connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    assert async_to_sync(store.input_queue.apending)(RUN) == (queued,)
