"""Properties of durable runs under random verdicts and random crashes (SPEC §5–§7, §10).

A scenario is a random run: a few tool steps (each one to three calls, some to a gated
tool), a verdict for every gated call — approve with its valid token, approve with a
forged, tampered, garbled, foreign-run or missing token, deny, conflicting verdicts, or no
verdict — and a set of crash points. A crash raises out of the leg at a model call, a tool
execution, or just before or just after a checkpoint is persisted, like a process dying
there; the driver then resumes from whatever the store last holds, as a fresh process
would. Whatever the crashes:

(a) the checkpoints persisted are exactly those of the straight, uninterrupted run with the
    same verdicts — no boundary lost, repeated or different, the final history included;
(b) the gated tool never runs for a call without an approving verdict whose token
    verifies, and in the straight run it runs exactly once for each such call.

The model answers by position in the history, so a step replayed after a crash gets the
same reply; clock and ids are fixed.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from deuz_django.core import Deps, ToolApprovalRequest, generate_text, tool
from deuz_django.core._loop.approval import TOKEN_DENIAL_REASON
from deuz_django.core.durable import (
    AgentCheckpoint,
    DurableSession,
    InMemorySessionStore,
    create_approval_signer,
    resume_from_checkpoint,
)
from deuz_django.core.testing import reply
from deuz_django.core.testing.contracts import FixedClock

from ._support import Crash, PositionalModel

RUN_ID = "prop-run"
SECRET = "property-secret"
FINAL_TEXT = "done"
VERDICTS = (
    "approve",  # the only verdict that authorizes the call
    "approve_forged",  # minted with another secret
    "approve_tampered",  # a genuine token for the same call with another input (D4)
    "approve_garbled",  # the genuine token with its MAC altered
    "approve_foreign_run",  # a genuine token bound to another run (R10.9.3)
    "approve_other_call",  # a genuine token for another approval id (R10.9.2)
    "approve_without_token",
    "deny",
    "conflicting",  # approve (valid token) and deny for one id (D10)
    "none",  # no verdict: unanswered gated calls are denied on resume
)
CRASH_SITES = ("model", "tool", "before-save", "after-save")


@dataclass
class Scenario:
    steps: list[list[str]]  # per step, the tool of each call ("safe" or "gated")
    verdicts: dict[str, str]  # gated call id -> one of VERDICTS

    def call_id(self, step: int, index: int) -> str:
        return f"c{step}_{index}"


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    steps = draw(
        st.lists(
            st.lists(st.sampled_from(["safe", "gated"]), min_size=1, max_size=3),
            max_size=4,
        )
    )
    scenario = Scenario(steps, {})
    for k, calls in enumerate(steps):
        for i, name in enumerate(calls):
            if name == "gated":
                scenario.verdicts[scenario.call_id(k, i)] = draw(
                    st.sampled_from(VERDICTS)
                )
    return scenario


@dataclass
class World:
    """Everything one drive of a scenario touches: model, tools, store and crash sites."""

    scenario: Scenario
    crash_at: frozenset[int] = frozenset()  # ordinals of the site events that crash
    events: int = 0
    gated_runs: list[str] = field(default_factory=list)
    saved: list[dict[str, Any]] = field(default_factory=list)

    def site(self, kind: str) -> None:
        """One crash-site event; raises :class:`Crash` when it is a chosen one."""
        assert kind in CRASH_SITES
        ordinal = self.events
        self.events += 1
        if ordinal in self.crash_at:
            raise Crash(kind)


def history_model(world: World) -> PositionalModel:
    """Step ``k`` calls the scenario's tools for step ``k``; after the last, it answers."""
    scenario = world.scenario
    replies = [
        reply(
            tool_calls=[
                (scenario.call_id(k, i), name, {"n": k * 10 + i})
                for i, name in enumerate(calls)
            ],
            usage=(10 + k, 1 + len(calls)),
        )
        for k, calls in enumerate(scenario.steps)
    ]
    return PositionalModel(
        [*replies, reply(text=FINAL_TEXT, usage=(5, 1))],
        on_call=lambda: world.site("model"),
    )


class RecordingStore(InMemorySessionStore):
    """Remembers every checkpoint it persisted, in order; may crash around a save."""

    def __init__(self, world: World) -> None:
        super().__init__()
        self.world = world

    def save(self, checkpoint: AgentCheckpoint) -> None:
        self.world.site("before-save")
        super().save(checkpoint)
        self.world.saved.append(checkpoint.to_json())
        self.world.site("after-save")


SIGNER = create_approval_signer(secret=SECRET, clock=FixedClock())
FORGER = create_approval_signer(secret="not-" + SECRET, clock=FixedClock())


def _garble(token: str) -> str:
    version, body, mac = token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(mac + "="))
    raw[0] ^= 0x01
    return (
        f"{version}.{body}.{base64.urlsafe_b64encode(bytes(raw)).rstrip(b'=').decode()}"
    )


def _responses(
    checkpoint: AgentCheckpoint, verdicts: dict[str, str]
) -> list[dict[str, Any]]:
    """The verdicts a client sends for a suspended checkpoint's pending approvals."""
    responses: list[dict[str, Any]] = []
    for request in checkpoint.pending_approvals or ():
        kind = verdicts[request.approval_id]
        unsigned = replace(request, token=None)
        token = {
            "approve": request.token,
            "conflicting": request.token,
            "approve_forged": FORGER.sign(unsigned, RUN_ID),
            "approve_tampered": SIGNER.sign(replace(unsigned, input={"n": -1}), RUN_ID),
            "approve_garbled": _garble(request.token or "v1.e30.AAAA"),
            "approve_foreign_run": SIGNER.sign(unsigned, "another-run"),
            "approve_other_call": SIGNER.sign(
                replace(unsigned, approval_id="c99_0", tool_call_id="c99_0"), RUN_ID
            ),
        }.get(kind)
        if kind == "none":
            continue
        if kind == "deny":
            responses.append(
                {"approvalId": request.approval_id, "approved": False, "reason": "no"}
            )
            continue
        if (
            kind == "conflicting"
        ):  # the approval comes last, so "last wins" would run it
            responses.append({"approvalId": request.approval_id, "approved": False})
        verdict = {"approvalId": request.approval_id, "approved": True}
        if token is not None:
            verdict["token"] = token
        responses.append(verdict)
    # A verdict for a call this run never made is ignored.
    responses.append({"approvalId": "c99_0", "approved": True})
    return responses


async def drive(world: World) -> InMemorySessionStore:
    """Run the scenario to completion, resuming after every crash and suspension."""

    @tool
    async def safe(n: int) -> str:
        world.site("tool")
        return f"safe {n}"

    @tool(needs_approval=True)
    async def gated(n: int) -> str:
        world.gated_runs.append(f"c{n // 10}_{n % 10}")
        world.site("tool")
        return f"gated {n}"

    store = RecordingStore(world)
    common: dict[str, Any] = {
        "model": history_model(world),
        "tools": [safe, gated],
        "max_steps": 50,
        "approval_signer": SIGNER,
        "deps": Deps(clock=FixedClock(), generate_id=lambda: "unused-id"),
    }
    for _ in range(100):
        checkpoint = store.load(RUN_ID)
        try:
            if checkpoint is None:
                await generate_text(
                    prompt="go", session=DurableSession(store, RUN_ID), **common
                )
            elif checkpoint.status == "completed":
                return store
            elif checkpoint.status == "suspended":
                await resume_from_checkpoint(
                    store,
                    RUN_ID,
                    approval_responses=_responses(checkpoint, world.scenario.verdicts),
                    **common,
                )
            else:
                await resume_from_checkpoint(store, RUN_ID, **common)
        except Crash:
            continue
    raise AssertionError("the run never completed")


def _tool_results(checkpoint: AgentCheckpoint) -> dict[str, Any]:
    return {
        part["toolUseId"]: part
        for message in checkpoint.to_json()["messages"]
        if message["role"] == "tool"
        for part in message["content"]
    }


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.data())
def test_crashes_never_change_the_run_and_only_valid_approvals_execute(
    scenario: Scenario, data: st.DataObject
) -> None:
    # SPEC R6.4, R6.6, R6.7, R7.2, R7.7, R10.9, D4, D10
    straight = World(scenario)
    asyncio.run(drive(straight))
    # Crash points among the events the straight run went through, so they do land.
    crash_at = data.draw(
        st.frozensets(st.integers(0, straight.events), max_size=4), label="crash_at"
    )
    crashed = World(scenario, crash_at)
    crashed_store = asyncio.run(drive(crashed))

    # (a) every boundary persisted once, identical to the straight run's.
    assert crashed.saved == straight.saved
    assert [cp["stepIndex"] for cp in straight.saved] == list(
        range(1, len(straight.saved) + 1)
    )
    final = crashed_store.load(RUN_ID)
    assert final is not None
    assert final.to_json() == straight.saved[-1]
    assert final.status == "completed"

    # (b) the gated tool runs only for approving verdicts with a token that verifies.
    authorized = {cid for cid, kind in scenario.verdicts.items() if kind == "approve"}
    assert set(crashed.gated_runs) <= authorized
    assert sorted(straight.gated_runs) == sorted(authorized)
    results = _tool_results(final)
    for call_id, kind in scenario.verdicts.items():
        result = results[call_id]
        if kind == "approve":
            assert "isError" not in result
        else:
            assert result["isError"] is True
            if kind.startswith("approve_"):
                assert result["result"] == (
                    f"Tool call denied. Reason: {TOKEN_DENIAL_REASON}"
                )


def test_the_bad_tokens_fail_for_their_own_reasons() -> None:
    # Guards the property test: a forged or garbled token does not verify; the others
    # verify and are refused by the loop for what they pin (run, input, approval id).
    request = ToolApprovalRequest(
        approval_id="c0_0", tool_call_id="c0_0", tool_name="gated", input={"n": 0}
    )
    genuine = SIGNER.sign(request, RUN_ID)
    assert SIGNER.verify(genuine) is not None
    assert SIGNER.verify(FORGER.sign(request, RUN_ID)) is None
    assert SIGNER.verify(_garble(genuine)) is None
    foreign = SIGNER.verify(SIGNER.sign(request, "another-run"))
    assert foreign is not None
    assert foreign["runId"] == "another-run"
    tampered = SIGNER.verify(SIGNER.sign(replace(request, input={"n": -1}), RUN_ID))
    assert tampered is not None
    assert tampered["input"] == {"n": -1}
