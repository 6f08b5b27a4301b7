"""Tokens and checkpoints against JavaScript's JSON rules, over random inputs (docs/interop.md).

The oracle is :mod:`tests.core.jsrules`, ECMA-262's ``JSON.stringify`` written out. Inputs
mix integer-like keys into shuffled key orders, draw strings from every code point (lone
surrogates included), and numbers from the cases where Python and JavaScript part: ``1.0``,
``0.1``, ``1e21``, ``1e-7``, ``-0.0`` and integers beyond 2**53.
"""

from __future__ import annotations

import base64
import hmac
import json
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_django.core.approvals import ToolApprovalRequest
from deuz_django.core.durable.codec import deserialize_checkpoint, serialize_checkpoint
from deuz_django.core.durable.signer import create_approval_signer

from .. import jsrules
from ..jsrules import finite_floats, json_values, keys, strings

SECRET = "s3cret-ü"


class FixedClock:
    def __init__(self, now: float) -> None:
        self.ms = now

    def now(self) -> float:
        return self.ms


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _reference_token(payload: dict[str, Any]) -> str:
    """The token the reference mints for ``payload``: R10.3 over JSON.stringify's text."""
    body = _b64url(jsrules.stringify(payload).encode())
    mac = hmac.digest(SECRET.encode(), f"v1.{body}".encode(), "sha256")
    return f"v1.{body}.{_b64url(mac)}"


@st.composite
def records(
    draw: st.DrawFn,
    required: dict[str, st.SearchStrategy[Any]],
    optional: dict[str, st.SearchStrategy[Any]] | None = None,
) -> dict[str, Any]:
    """A JSON object with the required keys, some optional ones and unknown keys, in a
    random order: what a newer reference, or a user by hand, may have written."""
    fields = {k: draw(s) for k, s in required.items()}
    for k, s in (optional or {}).items():
        if draw(st.booleans()):
            fields[k] = draw(s)
    known = set(required) | set(optional or {})
    extra = draw(
        st.dictionaries(keys.filter(lambda k: k not in known), json_values, max_size=2)
    )
    items = list((fields | extra).items())
    return dict(draw(st.permutations(items)))


# -- approval requests and their tokens ----------------------------------------------

request_objects = records(
    {
        "approvalId": strings,
        "toolCallId": strings,
        "toolName": strings,
        "input": json_values,
    },
    {
        "agentPath": st.lists(strings, max_size=2),
        "token": strings,
        "runId": strings,  # a stale field: overwritten in place (R10.2)
        "issuedAt": st.integers(),
    },
)
clock_readings = st.one_of(st.integers(0, 2**53), finite_floats)


@given(request=request_objects, run_id=st.none() | strings, now=clock_readings)
def test_a_token_is_the_one_the_reference_mints_for_the_same_request(
    request: dict[str, Any], run_id: str | None, now: float
) -> None:
    # R10.2, R10.3 with rules 1, 3, 5: the same payload text, so the same token.
    signer = create_approval_signer(secret=SECRET, clock=FixedClock(now))
    payload = dict(request)  # JavaScript's {...request, runId, issuedAt}
    if run_id is not None:
        payload["runId"] = run_id
    payload["issuedAt"] = now
    token = signer.sign(request, run_id)
    assert token == _reference_token(payload)
    assert signer.verify(token) == json.loads(jsrules.stringify(payload))


@given(request=request_objects, now=clock_readings)
def test_a_request_read_from_json_signs_like_the_object_it_was_read_from(
    request: dict[str, Any], now: float
) -> None:
    # Rule 4: unknown keys are signed too, as the reference signs every own key.
    signer = create_approval_signer(secret=SECRET, clock=FixedClock(now))
    read = ToolApprovalRequest.from_json(request)
    assert signer.sign(read, "run-1") == signer.sign(request, "run-1")


# -- checkpoints the reference wrote ---------------------------------------------------

byte_tags = st.binary(max_size=6).map(
    lambda b: {"$deuzBytes": base64.b64encode(b).decode()}
)
user_data = st.one_of(json_values, byte_tags, st.lists(byte_tags, max_size=2))
nullable_text = st.none() | strings
parts = st.one_of(
    records({"type": st.just("text"), "text": strings}),
    records(
        {"type": st.just("image"), "image": st.one_of(strings, byte_tags)},
        {"mediaType": nullable_text},
    ),
    records(
        {"type": st.just("tool_use"), "id": strings, "name": strings},
        {
            "input": user_data,
            "providerMetadata": st.none()
            | st.dictionaries(keys, json_values, max_size=2),
        },
    ),
    records(
        {"type": st.just("tool_result"), "toolUseId": strings},
        {"result": user_data, "isError": st.none() | st.booleans()},
    ),
    records(
        {"type": st.just("reasoning"), "text": strings},
        {
            "signature": nullable_text,
            "encrypted": st.none() | st.booleans(),
            "redacted": st.none() | st.booleans(),
        },
    ),
)
messages = records(
    {
        "role": st.sampled_from(["system", "user", "assistant", "tool"]),
        "content": st.one_of(strings, st.lists(parts, max_size=3)),
    },
    {"providerMetadata": st.none() | st.dictionaries(keys, json_values, max_size=2)},
)
counters = st.integers(0, 2**60)
usages = records(
    dict.fromkeys(
        [
            "inputTokens",
            "outputTokens",
            "reasoningTokens",
            "cachedReadTokens",
            "cacheWriteTokens",
            "cacheWrite1hTokens",
            "totalTokens",
        ],
        counters,
    ),
    {"audioTokens": st.none() | counters, "serverToolUses": st.none() | counters},
)
checkpoints = records(
    {
        "version": st.just(1),
        "runId": strings,
        "stepId": strings,
        "stepIndex": st.integers(0, 2**53),
        "status": st.sampled_from(["running", "suspended", "completed"]),
        "messages": st.lists(messages, max_size=3),
        "usage": usages,
        "createdAt": st.one_of(st.integers(0, 2**53), finite_floats),
    },
    {
        "pendingApprovals": st.none() | st.lists(request_objects, max_size=2),
        "agentPath": st.none() | st.lists(strings, max_size=2),
    },
)


# Big trees: generous on a shared machine, where timing says nothing about correctness.
big_trees = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@big_trees
@given(checkpoints)
def test_a_checkpoint_the_reference_wrote_round_trips_byte_for_byte(
    tree: dict[str, Any],
) -> None:
    # SPEC R8.6 with rules 1-5: key order (integer-like keys, the order read), unknown
    # data, numbers, strings, byte tags. JavaScript holds numbers as doubles, so the text it
    # wrote has every integer beyond 2**53 rounded: written here with exact_ints=False.
    text = jsrules.stringify(tree, exact_ints=False)
    assert serialize_checkpoint(deserialize_checkpoint(text)) == text


@big_trees
@given(checkpoints)
def test_a_checkpoint_rebuilt_in_python_writes_javascripts_order(
    tree: dict[str, Any],
) -> None:
    # Rule 2: one derived with replace() writes R6.3's key order, user data in JS order.
    text = jsrules.stringify(tree, exact_ints=False)
    rebuilt = serialize_checkpoint(replace(deserialize_checkpoint(text)))
    assert rebuilt == jsrules.stringify(json.loads(rebuilt), exact_ints=False)
    assert list(json.loads(rebuilt))[:5] == [
        "version",
        "runId",
        "stepId",
        "stepIndex",
        "status",
    ]
