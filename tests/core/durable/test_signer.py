"""The approval signer against the vectors recorded from the reference (SPEC §10, D3)."""

from __future__ import annotations

import base64
import hmac
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from deuz_django.core.approvals import ToolApprovalRequest
from deuz_django.core.deps import SystemClock
from deuz_django.core.durable.signer import ApprovalSigner, create_approval_signer

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vectors"
VECTORS = json.loads((FIXTURES / "signer.json").read_text("utf-8"))
SECRET: str = VECTORS["secret"]
NOW: int = VECTORS["clock_now"]
SIGNED = {case["name"]: case for case in VECTORS["signed"]}

# Non-canonical spellings of a valid token that the reference accepts (R10.6) and D3
# rejects: the MAC in the standard alphabet, padded, with a space, or with a last character
# that differs only in discarded bits; and a body segment written with "=" padding.
D3_REJECTED = {
    "mac_standard_base64_chars",
    "mac_with_padding_appended",
    "mac_with_space_inserted",
    "mac_last_char_R_same_high_bits",
    "mac_last_char_S_same_high_bits",
    "mac_last_char_T_same_high_bits",
    "valid_mac_body_with_padding_chars",
}


class FixedClock:
    def __init__(self, now: float) -> None:
        self.ms = now

    def now(self) -> float:
        return self.ms


def _signer(now: float = NOW, **kwargs: Any) -> ApprovalSigner:
    return create_approval_signer(secret=SECRET, clock=FixedClock(now), **kwargs)


# -- construction --------------------------------------------------------------------


def test_secret_is_utf8_of_the_recorded_hex() -> None:
    # SPEC R10.1: the key is the UTF-8 bytes of the secret.
    assert SECRET.encode().hex() == VECTORS["secret_utf8_hex"]


@pytest.mark.parametrize("secret", ["", None, b"bytes"])
def test_a_missing_secret_raises_the_reference_message(secret: Any) -> None:
    # SPEC R10.1
    with pytest.raises(TypeError) as excinfo:
        create_approval_signer(secret=secret)
    assert str(excinfo.value) == (
        "createApprovalSigner: `secret` must be a non-empty string."
    )


@pytest.mark.parametrize("fallbacks", ["old-secret", [""], ["ok", None]])
def test_fallback_secrets_must_be_non_empty_strings(fallbacks: Any) -> None:
    with pytest.raises(TypeError, match="fallback_secrets"):
        create_approval_signer(secret="s", fallback_secrets=fallbacks)


def test_the_default_clock_is_the_wall_clock_in_whole_milliseconds() -> None:
    before = SystemClock().now()
    token = create_approval_signer(secret="s").sign({"approvalId": "a"})
    payload = create_approval_signer(secret="s").verify(token)
    assert payload is not None
    assert isinstance(payload["issuedAt"], int)
    assert before <= payload["issuedAt"] <= SystemClock().now()


# -- minting -------------------------------------------------------------------------


@pytest.mark.parametrize("case", VECTORS["signed"], ids=lambda c: c["name"])
def test_signed_vector_is_byte_identical(case: dict[str, Any]) -> None:
    # SPEC R10.2, R10.3
    run_id = case.get("context", {}).get("runId")
    token = _signer().sign(case["request"], run_id)
    assert token == case["token"]
    assert token.rsplit(".", 1)[1] == case["mac_segment"]


@pytest.mark.parametrize("case", VECTORS["signed"], ids=lambda c: c["name"])
def test_signed_vector_verifies_to_the_reference_payload(case: dict[str, Any]) -> None:
    # SPEC R10.5: every token the reference mints still verifies (D3).
    payload = _signer().verify(case["token"])
    assert payload == case["verify_no_options"]
    assert (
        json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        == (case["payload_json"])
    )


def test_a_request_value_signs_like_its_json_form() -> None:
    # SPEC R10.2: every own key in the reference order, a stale token included.
    case = SIGNED["request_with_existing_token_field"]
    request = ToolApprovalRequest(
        approval_id="toolu_8",
        tool_call_id="toolu_8",
        tool_name="t",
        input={},
        token="v1.old.token",
    )
    assert _signer().sign(request, run_id="r") == case["token"]


def test_javascript_number_formatting_is_reproduced() -> None:
    # SPEC R10.4: the reference's input had -0 and 1e21; 1.0 is written as 1 too.
    case = SIGNED["numbers_and_nesting"]
    request = json.loads(json.dumps(case["request"]))
    request["input"] |= {"a": 1.0, "c": -0.0, "d": 1e21}
    assert _signer().sign(request) == case["token"]


def test_integer_like_input_keys_are_signed_in_javascript_order() -> None:
    # docs/interop.md rule 1: the reference's payload holds {"b":1,"2":0} as {"2":0,"b":1}.
    request = {"approvalId": "c", "toolCallId": "c", "toolName": "t"}
    shuffled = _signer().sign({**request, "input": {"b": 1, "2": 0}})
    assert shuffled == _signer().sign({**request, "input": {"2": 0, "b": 1}})
    assert b'"input":{"2":0,"b":1}' in base64.urlsafe_b64decode(
        shuffled.split(".")[1] + "=="
    )


def test_a_big_int_is_signed_exactly_and_a_rounded_one_verifies_as_written() -> None:
    # docs/interop.md rule 3, both ways round. Python -> reference: the exact digits are
    # signed (the reference, holding a double, would sign 18446744073709552000; its
    # verify accepts ours, as the MAC covers the text). Reference -> Python: its token
    # verifies here and reads the digits it wrote.
    request = {"approvalId": "c", "toolCallId": "c", "toolName": "t"}
    ours = _signer().sign({**request, "input": {"n": 2**64 + 1}})
    assert b'{"n":18446744073709551617}' in base64.urlsafe_b64decode(
        ours.split(".")[1] + "=="
    )
    theirs = _token_over(
        json.dumps(
            {**request, "input": {"n": 18446744073709552000}, "issuedAt": NOW},
            separators=(",", ":"),
        ).encode()
    )
    payload = _signer().verify(theirs)
    assert payload is not None
    assert payload["input"] == {"n": 18446744073709552000}
    assert float(payload["input"]["n"]) == float(2**64 + 1)  # the same double in JS


def test_a_float_clock_signs_like_the_reference() -> None:
    # SPEC R10.2: issuedAt is whatever number the clock returns, JS-formatted.
    case = SIGNED["basic"]
    assert _signer(float(NOW)).sign(case["request"]) == case["token"]


def test_signing_is_deterministic_for_one_clock_reading() -> None:
    # SPEC R10.3
    request = SIGNED["basic"]["request"]
    assert _signer().sign(request) == _signer().sign(request)


# -- verification --------------------------------------------------------------------


@pytest.mark.parametrize("case", VECTORS["expiry"])
def test_expiry_table(case: dict[str, Any]) -> None:
    # SPEC R10.5 step 6: an age equal to max_age_ms is expired; a negative age passes.
    token = SIGNED[case["token_name"]]["token"]
    payload = _signer(case["verify_clock_now"]).verify(token, case["maxAgeMs"])
    assert (payload is not None) is case["valid"]


@pytest.mark.parametrize("case", VECTORS["tampered"], ids=lambda c: c["name"])
def test_tampered_vector(case: dict[str, Any]) -> None:
    # SPEC R10.5, R10.6; D3 rejects the non-canonical spellings the reference accepts.
    result = _signer().verify(case["token"])
    if case["name"] in D3_REJECTED:
        assert case["reference_accepts"]
        assert result is None
    else:
        assert result == case["verify_result"]


def test_every_reference_accepted_variant_is_classified() -> None:
    accepted = {c["name"] for c in VECTORS["tampered"] if c["reference_accepts"]}
    canonical = {"valid_mac_payload_number_issuedAt_only", "valid_mac_issuedAt_float"}
    assert accepted == D3_REJECTED | canonical


@pytest.mark.parametrize(
    "token",
    [None, 42, 1.5, b"v1.a.b", ["v1", "a", "b"], {"token": "v1.a.b"}, object()],
)
def test_a_non_string_token_is_none(token: Any) -> None:
    # SPEC R10.5: verify never raises.
    assert _signer().verify(token) is None


def test_a_token_as_bytes_is_none_even_when_valid() -> None:
    assert _signer().verify(SIGNED["basic"]["token"].encode()) is None


@pytest.mark.parametrize(
    "suffix", ["\ud800", "é", "\x00"], ids=["lone-surrogate", "non-ascii", "nul"]
)
def test_non_ascii_in_a_segment_is_none(suffix: str) -> None:
    version, body, mac = SIGNED["basic"]["token"].split(".")
    assert _signer().verify(f"{version}.{body}{suffix}.{mac}") is None
    assert _signer().verify(f"{version}.{body}.{mac[:-1]}{suffix}") is None


@pytest.mark.parametrize(
    "body",
    [b"[1]", b'"x"', b"5", b"true", b'{"issuedAt":true}', b'{"issuedAt":null}'],
)
def test_a_valid_mac_over_a_payload_without_numeric_issued_at_is_none(
    body: bytes,
) -> None:
    # SPEC R10.5 step 5: the payload must be an object whose issuedAt is a number.
    assert _signer().verify(_token_over(body)) is None


@pytest.mark.parametrize(
    "body",
    [b'{"issuedAt":1,"x":"\xff"}', b'{"issuedAt":NaN}', b'{"issuedAt":1'],
    ids=["invalid-utf8", "nan", "truncated-json"],
)
def test_a_valid_mac_over_a_body_that_is_not_json_is_none(body: bytes) -> None:
    # SPEC R10.5 step 4
    assert _signer().verify(_token_over(body)) is None


def test_a_lone_surrogate_is_signed_escaped_and_comes_back() -> None:
    # JSON.stringify escapes a lone surrogate, so the body is always valid UTF-8.
    signer = _signer()
    token = signer.sign({"approvalId": "\ud800"})
    assert "\\ud800" in base64.urlsafe_b64decode(token.split(".")[1] + "==").decode()
    assert signer.verify(token) == {"approvalId": "\ud800", "issuedAt": NOW}


# -- key rotation --------------------------------------------------------------------


def test_a_token_from_the_old_secret_verifies_with_it_as_a_fallback() -> None:
    old = create_approval_signer(secret="old", clock=FixedClock(NOW))
    rotated = create_approval_signer(
        secret="new", clock=FixedClock(NOW), fallback_secrets=["older", "old"]
    )
    token = old.sign(SIGNED["basic"]["request"])
    assert rotated.verify(token) == SIGNED["basic"]["verify_no_options"]
    assert create_approval_signer(secret="new").verify(token) is None


def test_new_tokens_are_minted_with_the_primary_secret() -> None:
    rotated = create_approval_signer(
        secret="new", clock=FixedClock(NOW), fallback_secrets=["old"]
    )
    token = rotated.sign(SIGNED["basic"]["request"])
    assert create_approval_signer(secret="new").verify(token) is not None
    assert create_approval_signer(secret="old").verify(token) is None
    assert token == create_approval_signer(secret="new", clock=FixedClock(NOW)).sign(
        SIGNED["basic"]["request"]
    )


# -- properties ----------------------------------------------------------------------

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
_requests = st.builds(
    ToolApprovalRequest,
    approval_id=st.text(min_size=1),
    tool_call_id=st.text(min_size=1),
    tool_name=st.text(min_size=1),
    input=_json_values,
    agent_path=st.none() | st.lists(st.text(), min_size=1, max_size=3).map(tuple),
)


@given(request=_requests, run_id=st.none() | st.text(), now=st.integers(0, 2**53))
def test_any_request_round_trips(
    request: ToolApprovalRequest, run_id: str | None, now: int
) -> None:
    signer = _signer(now)
    expected = request.to_json()
    if run_id is not None:
        expected["runId"] = run_id
    expected["issuedAt"] = now
    payload = signer.verify(signer.sign(request, run_id))
    assert _as_js_numbers(payload) == _as_js_numbers(expected)


_mutations = st.one_of(
    st.tuples(st.just("replace"), st.integers(min_value=0), st.characters()),
    st.tuples(st.just("insert"), st.integers(min_value=0), st.characters()),
    st.tuples(st.just("delete"), st.integers(min_value=0), st.just("")),
)


@given(request=_requests, mutation=_mutations)
def test_any_single_character_mutation_is_rejected(
    request: ToolApprovalRequest, mutation: tuple[str, int, str]
) -> None:
    # D3: each token has exactly one accepted spelling.
    signer = _signer()
    token = signer.sign(request, "run-1")
    kind, index, char = mutation
    if kind == "insert":
        i = index % (len(token) + 1)
        mutated = token[:i] + char + token[i:]
    else:
        i = index % len(token)
        mutated = token[:i] + (char if kind == "replace" else "") + token[i + 1 :]
    assume(mutated != token)  # replacing a character by itself is no mutation
    assert signer.verify(mutated) is None


# -- helpers -------------------------------------------------------------------------


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _as_js_numbers(value: Any) -> Any:
    """Numbers as JS holds them: ``1.0`` is written ``1`` and ``5.6e16`` as its digits,
    which Python reads back as ints."""
    if isinstance(value, dict):
        return {k: _as_js_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_js_numbers(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def _token_over(body: bytes) -> str:
    """A correct MAC over a hand-written body, as the vectors' ``valid_mac_*`` tokens."""
    segment = _b64url(body)
    mac = hmac.digest(SECRET.encode(), f"v1.{segment}".encode(), "sha256")
    return f"v1.{segment}.{_b64url(mac)}"
