"""DjangoSessionStore forks: the shared forking contract on the tables, the lineage a
fork's row records, and a fork that fails midway leaving nothing behind."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connections
from django.utils import timezone

from deuz_django.core.approvals import input_digest
from deuz_django.core.durable import ForkEdit
from deuz_django.core.testing.contracts import ForkingStoreContract
from deuz_django.core.testing.contracts.forking import REFUND
from deuz_django.models import Approval, ApprovalStatus, Run, RunCall, RunStep
from deuz_django.storage import forking
from deuz_django.storage.store import DjangoSessionStore


@pytest.mark.django_db(transaction=True)
class TestDjangoForking(ForkingStoreContract):
    @pytest.fixture
    async def store(self) -> Any:
        yield DjangoSessionStore()
        await sync_to_async(connections.close_all)()

    async def make_decision(self, run_id: str, tool_call_id: str) -> str:
        run = await Run.objects.aget(run_id=run_id)
        row = await Approval.objects.acreate(
            run=run,
            approval_id=tool_call_id,
            step_index=1,
            tool_call_id=tool_call_id,
            tool_name="refund",
            input=REFUND,
            input_digest=input_digest(REFUND),
            status=ApprovalStatus.APPROVED,
            decided_at=timezone.now(),
        )
        return str(row.pk)


def parent() -> Run:
    """``run-p`` as the contract writes it, titled, a run of the ``gated`` agent."""
    async_to_sync(TestDjangoForking().parent)(DjangoSessionStore())
    Run.objects.filter(run_id="run-p").update(agent="gated", title="Refund")
    return Run.objects.get(run_id="run-p")


@pytest.mark.django_db
def test_a_forks_row_records_where_it_came_from_and_the_edit() -> None:
    source = parent()
    edit = ForkEdit(tool_call_id="c2", input={"usd": 3})
    DjangoSessionStore().fork(
        "run-p", step_index=1, run_id="run-f", edit=edit, with_turn=True
    )
    fork = Run.objects.get(run_id="run-f")
    assert (fork.forked_from, fork.forked_at_step, fork.forked_with_turn) == (
        source,
        1,
        True,
    )
    assert fork.fork_edit == {"toolCallId": "c2", "input": {"usd": 3}}
    assert (fork.agent, fork.title, fork.status) == (
        "gated",
        "Fork of Refund",
        "running",
    )
    assert list(source.forks.all()) == [fork]
    kept = RunCall.objects.get(step__run=fork, tool_call_id="c3")
    assert (kept.tool_name, kept.decision_id, kept.finished) == ("email", None, False)


@pytest.mark.django_db
def test_a_fork_asking_differently_is_titled_with_its_question() -> None:
    parent()
    edit = ForkEdit(message="Refund half, please.")
    DjangoSessionStore().fork("run-p", step_index=1, run_id="run-f", edit=edit)
    assert Run.objects.get(run_id="run-f").title == "Refund half, please."


@pytest.mark.django_db
def test_a_fork_that_fails_midway_leaves_nothing_behind() -> None:
    parent()
    with (
        mock.patch.object(forking, "_write_steps", side_effect=RuntimeError("died")),
        pytest.raises(RuntimeError),
    ):
        DjangoSessionStore().fork("run-p", step_index=2, run_id="run-f")
    assert not Run.objects.filter(run_id="run-f").exists()
    assert not RunStep.objects.filter(run__run_id="run-f").exists()
