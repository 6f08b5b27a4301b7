"""The in-memory input queue passes the contract; what it adds beyond it."""

from __future__ import annotations

import pytest

from deuz_django.core import Message
from deuz_django.core.durable import InMemoryInputQueue, InMemorySessionStore
from deuz_django.core.testing.contracts import (
    FixedClock,
    InputQueueContract,
    make_checkpoint,
)


class TestInMemoryInputQueue(InputQueueContract):
    @pytest.fixture
    def store(self) -> InMemorySessionStore:
        return InMemorySessionStore(input_queue=InMemoryInputQueue())


def test_a_delivered_input_records_the_step_whose_model_call_saw_it() -> None:
    queue = InMemoryInputQueue(clock=FixedClock(1_000), generate_id=lambda: "in-1")
    store = InMemorySessionStore(input_queue=queue)
    store.save(make_checkpoint("run-1", 3))
    queued = queue.put("run-1", "Hi again.")
    assert (queued.input_id, queued.accepted_at) == ("in-1", 1_000)
    history = (Message("user", "Hi."), queued.message(), Message("assistant", "Yes?"))
    store.save(make_checkpoint("run-1", 4, messages=history))  # after step 3
    assert queue.inputs("run-1")[0].delivered_at_step == 3
    assert queue.inputs("run-1")[0].to_json() == {
        "inputId": "in-1",
        "seq": 1,
        "text": "Hi again.",
        "acceptedAt": 1_000,
        "deliveredAtStep": 3,
    }


def test_a_queue_of_no_store_accepts_input_for_any_run() -> None:
    queue = InMemoryInputQueue()
    assert queue.put("anything", "Hello.").seq == 1
