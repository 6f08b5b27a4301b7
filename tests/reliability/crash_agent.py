"""The agent of the crash sweep: every step's model turn and tool calls take a random
moment, so a SIGKILL lands anywhere — in a model call, in a tool, in a save — and each
checks the step journal before it acts, recording a ``VIOLATION`` effect if the journal
says it must not happen again: a model call for a turn already recorded, or a tool call
whose outcome is already recorded.

``DEUZ_TEST_PAUSE_AT`` (``model:<turn>`` or ``charge:<step>``) makes that moment last
``DEUZ_TEST_PAUSE_SECONDS``, long enough for a test to SIGSTOP the process inside it.

The run's id is its prompt, so the model and the tools know which run they serve. Each
of the ``STEPS`` steps calls ``note`` (idempotent: it may run again after a crash) and
``charge`` (not idempotent) side by side. A tool's effect is one line of the log under
the call's idempotency key, written whole or not at all. ``crashy``'s charge cannot tell
whether a call a crash interrupted had its effect: a person is asked.
``crashy_reconciling``'s charge can: its ``reconcile`` looks for the effect's line.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async

from deuz_django.core import ModelRequest, Reconciliation, ToolContext, tool
from deuz_django.core.testing import reply
from deuz_django.models import RunCall, RunStep
from deuz_django.registry import AgentSpec
from deuz_django.storage.db import once_more_if_broken
from tests.django.agents import record_effect, recorded_effects

STEPS = 3
FINAL_ANSWER = "All charged."


def _pause(at: str) -> float:
    """How long this moment lasts: a test's pause, or a random instant."""
    if os.environ.get("DEUZ_TEST_PAUSE_AT") == at:
        return float(os.environ.get("DEUZ_TEST_PAUSE_SECONDS", "0"))
    return 0.0


def _turn_recorded(run_id: str, step_index: int) -> bool:
    return once_more_if_broken(
        RunStep.objects.filter(run__run_id=run_id, step_index=step_index).exists
    )


def _outcome_recorded(run_id: str, tool_call_id: str) -> bool:
    return once_more_if_broken(
        RunCall.objects.filter(
            step__run__run_id=run_id, tool_call_id=tool_call_id, finished=True
        ).exists
    )


class CrashModel:
    """A model driven by the history, which refuses to be asked a recorded turn."""

    provider = "scripted"
    model_id = "crash-model"

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        run_id = str(request.messages[0].content)
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if await sync_to_async(_turn_recorded)(run_id, turn):
            record_effect(f"VIOLATION model:{run_id}:{turn}")
        record_effect(f"model:{run_id}:{turn}")
        await asyncio.sleep(random.uniform(0, 0.05) + _pause(f"model:{turn}"))
        if turn < STEPS:
            answer = reply(
                tool_calls=[
                    (f"n{turn}", "note", {"run": run_id, "step": turn}),
                    (f"c{turn}", "charge", {"run": run_id, "step": turn}),
                ],
                usage=(3, 2),
            )
        else:
            answer = reply(text=FINAL_ANSWER, usage=(3, 2))
        async for event in answer.play():
            yield event


def effect(kind: str, run: str, step: int, ctx: ToolContext) -> str:
    """The line that is a call's effect."""
    return f"{kind}:{run}:{step}:effect:{ctx.idempotency_key}"


def _act(kind: str, run: str, step: int, ctx: ToolContext) -> str:
    if _outcome_recorded(run, ctx.tool_call_id):
        record_effect(f"VIOLATION {kind}:{run}:{step}")
    record_effect(f"{kind}:{run}:{step}:start")
    time.sleep(random.uniform(0, 0.04) + _pause(f"{kind}:{step}"))
    record_effect(effect(kind, run, step, ctx))
    time.sleep(random.uniform(0, 0.04))
    record_effect(f"{kind}:{run}:{step}:end")
    return f"{kind} {step} done"


@tool(idempotent=True)
def note(run: str, step: int, ctx: ToolContext) -> str:
    """Write a note (safe to write twice)."""
    return _act("note", run, step, ctx)


@tool
def charge(run: str, step: int, ctx: ToolContext) -> str:
    """Charge a card (never twice without a person knowing)."""
    return _act("charge", run, step, ctx)


def _charged(args: dict[str, Any], ctx: ToolContext) -> Reconciliation:
    """Whether a charge a crash interrupted had its effect (noted in the log)."""
    run, step = args["run"], args["step"]
    if _outcome_recorded(run, ctx.tool_call_id):
        record_effect(f"VIOLATION reconcile:{run}:{step}")
    if effect("charge", run, step, ctx) in recorded_effects():
        record_effect(f"reconciled:{run}:{step}:happened")
        return Reconciliation.happened(f"charge {step} done")
    record_effect(f"reconciled:{run}:{step}:did-not-happen")
    return Reconciliation.did_not_happen()


@tool(name="charge", reconcile=_charged)
def reconciling_charge(run: str, step: int, ctx: ToolContext) -> str:
    """Charge a card (never twice: a charge in doubt is looked up first)."""
    return _act("charge", run, step, ctx)


crashy = AgentSpec(model=CrashModel(), tools=[note, charge], max_steps=STEPS + 2)
crashy_reconciling = AgentSpec(
    model=CrashModel(), tools=[note, reconciling_charge], max_steps=STEPS + 2
)
