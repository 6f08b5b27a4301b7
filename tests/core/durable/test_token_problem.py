"""``token_problem``: the one check of whether a token authorizes a call (SPEC R10.9, D4)."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import ToolApprovalRequest, ToolCall
from deuz_django.core.durable import TokenProblem, create_approval_signer, token_problem

ISSUED_MS = 1_700_000_000_000
CALL = ToolCall("toolu_1", "pay", {"usd": 100, "to": ["ana"], "urgent": True})


class Clock:
    def __init__(self) -> None:
        self.ms: float = ISSUED_MS

    def now(self) -> float:
        return self.ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def signer(clock: Clock) -> Any:
    return create_approval_signer(secret="s3cret", clock=clock)


def mint(signer: Any, call: ToolCall = CALL, run_id: str | None = "run-42") -> str:
    request = ToolApprovalRequest(
        approval_id=call.tool_call_id,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        input=call.args,
    )
    token: str = signer.sign(request, run_id)
    return token


def problem(
    signer: Any,
    token: str | None,
    call: ToolCall = CALL,
    run_id: str | None = "run-42",
    max_age_ms: float | None = 60_000,
) -> TokenProblem | None:
    return token_problem(
        token, call, signer=signer, run_id=run_id, max_age_ms=max_age_ms
    )


def test_a_token_minted_for_this_call_on_this_run_authorizes_it(signer: Any) -> None:
    # SPEC R10.9
    assert problem(signer, mint(signer)) is None


@pytest.mark.parametrize("token", [None, ""])
def test_no_token_is_missing(signer: Any, token: str | None) -> None:
    # SPEC R10.9.1: an approving verdict needs the token.
    found = problem(signer, token)
    assert found is TokenProblem.MISSING
    assert (found.code, found.message) == (
        "missing",
        "an approving verdict needs the approval's token",
    )


@pytest.mark.parametrize(
    "spoil",
    [
        lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"),  # tampered MAC
        lambda t: t.split(".")[0] + ".e30." + t.split(".")[2],  # swapped body
        lambda t: t[: len(t) // 2],  # truncated
        lambda t: "v1.garbage.mac",
        lambda t: t + ".extra",
    ],
    ids=["tampered", "swapped-body", "truncated", "garbled", "extra-segment"],
)
def test_a_token_that_does_not_verify_is_invalid(signer: Any, spoil: Any) -> None:
    # SPEC R10.5, R10.9.1
    found = problem(signer, spoil(mint(signer)))
    assert found is TokenProblem.INVALID
    assert found.code == "invalid"


def test_a_token_from_another_secret_is_invalid(signer: Any, clock: Clock) -> None:
    # SPEC R10.9.1: a forged token never verifies.
    forger = create_approval_signer(secret="not-the-secret", clock=clock)
    assert problem(signer, mint(forger)) is TokenProblem.INVALID


@pytest.mark.parametrize("bound", ["run-7", None])
def test_a_token_bound_to_another_run_or_to_none_is_other_run(
    signer: Any, bound: str | None
) -> None:
    # SPEC R10.9.3 with D4: on a durable call the payload carries this run's id.
    found = problem(signer, mint(signer, run_id=bound))
    assert found is TokenProblem.OTHER_RUN
    assert (found.code, found.message) == (
        "other_run",
        "the token was minted for another run",
    )


def test_without_a_run_id_any_binding_is_accepted(signer: Any) -> None:
    # SPEC R10.9.3: a call without a durable session checks no run binding (Q6).
    assert problem(signer, mint(signer, run_id="run-7"), run_id=None) is None
    assert problem(signer, mint(signer, run_id=None), run_id=None) is None


@pytest.mark.parametrize(
    "other",
    [
        ToolCall("toolu_2", "pay", CALL.args),
        ToolCall("toolu_1", "refund", CALL.args),
        ToolCall("toolu_1", "pay", {"usd": 1_000, "to": ["ana"], "urgent": True}),
        ToolCall("toolu_1", "pay", {"usd": 100, "to": ["ana"], "urgent": 1}),
        ToolCall("toolu_1", "pay", {"usd": 100, "to": ["ana"]}),
    ],
    ids=["call-id", "tool", "input", "true-is-not-1", "missing-key"],
)
def test_a_token_for_another_call_is_other_call(signer: Any, other: ToolCall) -> None:
    # D4: approvalId, toolName and input (as JSON values) must be the pending call's.
    found = problem(signer, mint(signer), call=other)
    assert found is TokenProblem.OTHER_CALL
    assert (found.code, found.message) == (
        "other_call",
        "the token was minted for another call",
    )


def test_input_is_compared_as_json(signer: Any) -> None:
    # D4: a tuple is the list it encodes, 100.0 is 100.
    same = ToolCall("toolu_1", "pay", {"usd": 100.0, "to": ("ana",), "urgent": True})
    assert problem(signer, mint(signer), call=same) is None


def test_a_token_at_or_past_max_age_is_expired(signer: Any, clock: Clock) -> None:
    # SPEC R10.5.6: an age equal to max_age_ms is expired.
    token = mint(signer)
    clock.ms = ISSUED_MS + 59_999
    assert problem(signer, token) is None
    clock.ms = ISSUED_MS + 60_000
    found = problem(signer, token)
    assert found is TokenProblem.EXPIRED
    assert (found.code, found.message) == ("expired", "the token has expired")
    assert problem(signer, token, max_age_ms=None) is None


def test_the_checks_run_missing_invalid_run_call_then_age(
    signer: Any, clock: Clock
) -> None:
    # The order of the brief's contract: an expired token for another call on another
    # run is reported as for another run, then as for another call.
    token = mint(signer, ToolCall("toolu_9", "pay", {}), run_id="run-7")
    clock.ms = ISSUED_MS + 10**9
    assert problem(signer, token) is TokenProblem.OTHER_RUN
    assert problem(signer, token, run_id="run-7") is TokenProblem.OTHER_CALL
    assert (
        problem(signer, token, ToolCall("toolu_9", "pay", {}), run_id="run-7")
        is TokenProblem.EXPIRED
    )
    assert problem(signer, token[:-1], run_id="run-7") is TokenProblem.INVALID


def test_a_problem_is_found_again_by_its_code() -> None:
    assert [p.code for p in TokenProblem] == [
        "missing",
        "invalid",
        "other_run",
        "other_call",
        "expired",
    ]
    assert TokenProblem("other_call") is TokenProblem.OTHER_CALL
