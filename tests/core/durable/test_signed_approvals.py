"""The signer wired into the loop: tokens on pending approvals, verification on settle
(SPEC R5.7, R10.7–R10.11, D2, D4)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from deuz_django.core import (
    Message,
    Tool,
    ToolApprovalRequest,
    ToolResultPart,
    ToolUsePart,
    agent_tool,
    generate_text,
    stream_chat,
)
from deuz_django.core.durable import (
    DurableSession,
    create_approval_signer,
    resume_from_checkpoint,
    resume_stream_from_checkpoint,
)
from deuz_django.core.parts import ToolApprovalRequestPart, ToolStatePart
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import (
    FakeClock,
    Probe,
    RecordingLogger,
    RecordingStore,
    collect,
    make_deps,
)

REASON = "Approval token missing, invalid, expired, or bound to another run."
DENIED = f"Tool call denied. Reason: {REASON}"


def _payload(token: str) -> dict[str, Any]:
    body = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def _signer(clock: FakeClock | None = None) -> Any:
    return create_approval_signer(secret="s3cret", clock=clock or FakeClock(1000))


def _pay(probe: Probe | None = None) -> Tool:
    return (probe or Probe("paid")).tool("pay", needs_approval=True)


async def _suspend(store: RecordingStore, signer: Any, run_id: str = "run") -> Any:
    return await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "pay", {"usd": 100})])]),
        prompt="go",
        tools=[_pay()],
        session=DurableSession(store, run_id),
        approval_signer=signer,
        deps=make_deps(),
    )


async def _settle_with(
    store: RecordingStore, signer: Any, verdict: dict[str, Any], **options: Any
) -> tuple[Probe, ToolResultPart]:
    probe = Probe("paid")
    result = await resume_from_checkpoint(
        store,
        "run",
        model=ScriptedModel([reply(text="done")]),
        tools=[_pay(probe)],
        approval_signer=signer,
        approval_responses=[{"approval_id": "c1", **verdict}],
        deps=make_deps(),
        **options,
    )
    [outcome] = result.response_messages[0].content
    assert isinstance(outcome, ToolResultPart)
    return probe, outcome


# -- R5.7, R10.8: signing ---------------------------------------------------------------------


async def test_pending_approvals_carry_a_token_bound_to_the_run() -> None:
    # SPEC R5.7, R10.8: tokens on pendingApprovals and in the suspended checkpoint.
    store = RecordingStore()
    signer = _signer()
    result = await _suspend(store, signer)
    [request] = result.pending_approvals or ()
    assert request.token is not None
    assert _payload(request.token) == {
        "approvalId": "c1",
        "toolCallId": "c1",
        "toolName": "pay",
        "input": {"usd": 100},
        "runId": "run",
        "issuedAt": 1000,
    }
    checkpoint = store.load("run")
    assert checkpoint is not None
    assert checkpoint.pending_approvals == (request,)


async def test_the_streaming_request_part_carries_the_token() -> None:
    # SPEC R5.7
    parts = await collect(
        stream_chat(
            model=ScriptedModel([reply(tool_calls=[("c1", "pay", {})])]),
            prompt="go",
            tools=[_pay()],
            approval_signer=_signer(),
        )
    )
    [request] = [p for p in parts if isinstance(p, ToolApprovalRequestPart)]
    assert request.request.token is not None
    # A non-durable call binds no runId (R5.7: context only when the loop is durable).
    assert "runId" not in _payload(request.request.token)


async def test_server_mode_decisions_are_not_signed() -> None:
    # SPEC R10.8
    class Exploding:
        def sign(self, request: Any, run_id: Any = None) -> str:
            raise AssertionError("server mode must not sign")

        def verify(self, token: Any, max_age_ms: Any = None) -> Any:
            raise AssertionError("server mode must not verify")

    result = await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "pay", {})]), reply(text="ok")]),
        prompt="go",
        tools=[_pay()],
        max_steps=2,
        approval_signer=Exploding(),
        approve_tool_call=lambda call, messages: True,
    )
    assert result.text == "ok"


async def test_a_failing_signer_sends_the_requests_unsigned_and_logs() -> None:
    # SPEC R5.7: best-effort; the unsigned request will then be denied on resume.
    error = RuntimeError("kms unavailable")

    class Broken:
        def sign(self, request: Any, run_id: Any = None) -> str:
            raise error

        def verify(self, token: Any, max_age_ms: Any = None) -> Any:
            return None

    logger = RecordingLogger()
    store = RecordingStore()
    result = await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "pay", {})])]),
        prompt="go",
        tools=[_pay()],
        session=DurableSession(store, "run"),
        approval_signer=Broken(),
        deps=make_deps(logger=logger),
    )
    [request] = result.pending_approvals or ()
    assert request.token is None
    assert logger.errors == [
        (
            "approval signing failed — requests go out unsigned",
            {"extra": {"error": error}},
        )
    ]
    probe, outcome = await _settle_with(store, _signer(), {"approved": True})
    assert probe.calls == []
    assert outcome.result == DENIED


# -- R10.9, D4: verification -----------------------------------------------------------------


async def test_an_echoed_token_approves_the_call() -> None:
    # SPEC R10.9
    store = RecordingStore()
    signer = _signer()
    first = await _suspend(store, signer)
    token = first.pending_approvals[0].token
    probe, outcome = await _settle_with(
        store, signer, {"approved": True, "token": token}
    )
    assert probe.calls == [{"usd": 100}]
    assert outcome.result == "paid"


async def test_a_denial_needs_no_token() -> None:
    # SPEC R10.9: denial verdicts never need tokens.
    store = RecordingStore()
    signer = _signer()
    await _suspend(store, signer)
    _, outcome = await _settle_with(
        store, signer, {"approved": False, "reason": "too much"}
    )
    assert outcome.result == "Tool call denied. Reason: too much"


def _tamper(token: str) -> str:
    version, _, mac = token.split(".")
    payload = _payload(token)
    payload["input"] = {"usd": 1_000_000}
    forged = base64.urlsafe_b64encode(
        json.dumps(payload, separators=(",", ":")).encode()
    )
    return f"{version}.{forged.rstrip(b'=').decode()}.{mac}"


def _other_signer_token(token: str) -> str:
    return create_approval_signer(secret="attacker", clock=FakeClock(1000)).sign(
        ToolApprovalRequest(
            approval_id="c1", tool_call_id="c1", tool_name="pay", input={"usd": 100}
        ),
        "run",
    )


def _signed(signer: Any, run_id: str | None = "run", **request: Any) -> str:
    fields = {
        "approval_id": "c1",
        "tool_call_id": "c1",
        "tool_name": "pay",
        "input": {"usd": 100},
    } | request
    return str(signer.sign(ToolApprovalRequest(**fields), run_id))


BAD_TOKENS = {
    "missing": lambda signer, good: None,
    "garbage": lambda signer, good: "not-a-token",
    "forged by another secret": lambda signer, good: _other_signer_token(good),
    "tampered body": lambda signer, good: _tamper(good),
    "truncated": lambda signer, good: good[:-3],
    "cross-run": lambda signer, good: _signed(signer, "other-run"),
    "unbound on a durable run": lambda signer, good: _signed(signer, None),
    "wrong approval id": lambda signer, good: _signed(signer, approval_id="c9"),
    "wrong tool": lambda signer, good: _signed(signer, tool_name="refund"),
    "wrong input": lambda signer, good: _signed(signer, input={"usd": 999}),
    "input of another type": lambda signer, good: _signed(signer, input={"usd": "100"}),
}


@pytest.mark.parametrize("make_token", BAD_TOKENS.values(), ids=BAD_TOKENS.keys())
async def test_a_token_that_does_not_authorize_this_call_denies_it(
    make_token: Any,
) -> None:
    # SPEC R10.9, D4 (Q6): the exact documented denial, and the tool never runs.
    store = RecordingStore()
    signer = _signer()
    first = await _suspend(store, signer)
    token = make_token(signer, first.pending_approvals[0].token)
    verdict = {"approved": True} | ({"token": token} if token is not None else {})
    probe, outcome = await _settle_with(store, signer, verdict)
    assert probe.calls == []
    assert (outcome.result, outcome.is_error) == (DENIED, True)


@pytest.mark.parametrize(("age_ms", "approved"), [(60_000, False), (59_999, True)])
async def test_a_token_as_old_as_the_max_age_is_expired(
    age_ms: int, approved: bool
) -> None:
    # SPEC R10.5.6, R10.7: age >= approval_max_age_ms is expired.
    store = RecordingStore()
    clock = FakeClock(1000)
    signer = _signer(clock)
    first = await _suspend(store, signer)
    token = first.pending_approvals[0].token
    clock.ms = 1000 + age_ms
    probe, outcome = await _settle_with(
        store,
        signer,
        {"approved": True, "token": token},
        approval_max_age_ms=60_000,
    )
    assert (probe.calls == [{"usd": 100}]) is approved
    assert (outcome.result == DENIED) is not approved


async def test_the_denial_reason_reaches_the_ui_verbatim() -> None:
    # SPEC R5.11
    store = RecordingStore()
    signer = _signer()
    await _suspend(store, signer)
    parts = await collect(
        resume_stream_from_checkpoint(
            store,
            "run",
            model=ScriptedModel([reply(text="done")]),
            tools=[_pay()],
            approval_signer=signer,
            approval_responses=[{"approval_id": "c1", "approved": True}],
            deps=make_deps(),
        )
    )
    [state] = [p for p in parts if isinstance(p, ToolStatePart) and p.denied]
    assert state.denied_reason == REASON


# -- R10.11: verification on plain calls ------------------------------------------------------


def _pending_history() -> list[Message]:
    return [
        Message("user", "go"),
        Message("assistant", (ToolUsePart("c1", "pay", {"usd": 100}),)),
    ]


@pytest.mark.parametrize("run_id", [None, "some-run"])
async def test_a_plain_call_verifies_tokens_without_run_binding(
    run_id: str | None,
) -> None:
    # SPEC R10.9.3, R10.11: no session → any valid token for this call, bound or not.
    signer = _signer()
    probe = Probe("paid")
    result = await generate_text(
        model=ScriptedModel([reply(text="done")]),
        messages=_pending_history(),
        tools=[_pay(probe)],
        approval_signer=signer,
        approval_responses=[
            {"approval_id": "c1", "approved": True, "token": _signed(signer, run_id)}
        ],
    )
    assert probe.calls == [{"usd": 100}]
    assert result.text == "done"


async def test_a_plain_call_still_rejects_a_token_for_another_input() -> None:
    # SPEC R10.11 with D4
    signer = _signer()
    probe = Probe()
    result = await generate_text(
        model=ScriptedModel([reply(text="done")]),
        messages=_pending_history(),
        tools=[_pay(probe)],
        approval_signer=signer,
        approval_responses=[
            {
                "approval_id": "c1",
                "approved": True,
                "token": _signed(signer, None, input={"usd": 1}),
            }
        ],
    )
    assert probe.calls == []
    assert result.response_messages[0].content[0].result == DENIED  # type: ignore[union-attr]


async def test_an_approved_ungated_deferred_call_needs_a_token_under_a_signer() -> None:
    # SPEC R5.10.6, Q10 kept: an explicit approval without token denies even when
    # no verdict would have run it.
    probe = Probe()
    result = await generate_text(
        model=ScriptedModel([reply(text="done")]),
        messages=_pending_history(),
        tools=[probe.tool("pay")],
        approval_signer=_signer(),
        approval_responses=[{"approval_id": "c1", "approved": True}],
    )
    assert probe.calls == []
    assert result.response_messages[0].content[0].result == DENIED  # type: ignore[union-attr]


# -- D2: sub-agent approvals are signed and verified --------------------------------------------


def _coder(probe: Probe | None = None) -> tuple[Tool, ScriptedModel]:
    child = ScriptedModel(
        [reply(tool_calls=[("k1", "run_shell", {"cmd": "ls"})]), reply(text="fixed")]
    )
    shell = (probe or Probe("ran")).tool("run_shell", needs_approval=True)
    return agent_tool(name="coder", model=child, tools=[shell]), child


async def _sub_agent_suspend(store: RecordingStore, signer: Any, coder: Tool) -> Any:
    return await generate_text(
        model=ScriptedModel(
            [reply(tool_calls=[("c1", "coder", {"prompt": "fix"})]), reply(text="end")]
        ),
        prompt="go",
        tools=[coder],
        max_steps=3,
        session=DurableSession(store, "root"),
        approval_signer=signer,
        deps=make_deps(),
    )


async def test_sub_agent_requests_are_signed_with_the_root_run_id() -> None:
    # D2 (Q2): signed like root approvals; the binding is the ROOT run id.
    store = RecordingStore()
    coder, _ = _coder()
    result = await _sub_agent_suspend(store, _signer(), coder)
    [request] = result.pending_approvals or ()
    assert request.token is not None
    assert _payload(request.token) == {
        "approvalId": "k1",
        "toolCallId": "k1",
        "toolName": "run_shell",
        "input": {"cmd": "ls"},
        "agentPath": ["coder"],
        "runId": "root",
        "issuedAt": 1000,
    }
    child = store.load("root::coder#c1")
    assert child is not None
    assert child.pending_approvals == (request,)


async def _sub_agent_resume(
    store: RecordingStore, signer: Any, coder: Tool, verdict: dict[str, Any]
) -> Any:
    return await resume_from_checkpoint(
        store,
        "root",
        model=ScriptedModel(
            [reply(tool_calls=[("c1", "coder", {"prompt": "fix"})]), reply(text="end")]
        ),
        tools=[coder],
        max_steps=3,
        approval_signer=signer,
        approval_responses=[{"approval_id": "k1", **verdict}],
        deps=make_deps(),
    )


async def test_a_sub_agent_verdict_with_its_token_executes_the_nested_call() -> None:
    # D2
    store = RecordingStore()
    signer = _signer()
    probe = Probe("ran")
    coder, _ = _coder(probe)
    first = await _sub_agent_suspend(store, signer, coder)
    token = first.pending_approvals[0].token
    await _sub_agent_resume(store, signer, coder, {"approved": True, "token": token})
    assert probe.calls == [{"cmd": "ls"}]


@pytest.mark.parametrize("token", [None, "forged"])
async def test_a_sub_agent_verdict_without_a_valid_token_is_denied(
    token: str | None,
) -> None:
    # D2 (Q2): a verdict for a sub-agent call needs its token too.
    store = RecordingStore()
    signer = _signer()
    probe = Probe()
    coder, child = _coder(probe)
    await _sub_agent_suspend(store, signer, coder)
    verdict = {"approved": True} | ({"token": token} if token else {})
    await _sub_agent_resume(store, signer, coder, verdict)
    assert probe.calls == []
    settled = child.requests[1].messages[-1].content[0]
    assert settled.result == DENIED  # type: ignore[union-attr]


async def test_a_sub_agent_token_bound_to_the_child_key_is_rejected() -> None:
    # D2: verified against the ROOT run id, not the child's checkpoint key.
    store = RecordingStore()
    signer = _signer()
    probe = Probe()
    coder, _ = _coder(probe)
    await _sub_agent_suspend(store, signer, coder)
    token = _signed(
        signer,
        "root::coder#c1",
        approval_id="k1",
        tool_call_id="k1",
        tool_name="run_shell",
        input={"cmd": "ls"},
        agent_path=("coder",),
    )
    await _sub_agent_resume(store, signer, coder, {"approved": True, "token": token})
    assert probe.calls == []
