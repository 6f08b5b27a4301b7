"""The checkpoint codec against the vectors recorded from the reference (SPEC §8)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from deuz_django.core.durable.checkpoint import AgentCheckpoint
from deuz_django.core.durable.codec import (
    decode_json,
    deserialize_checkpoint,
    encode_json,
    serialize_checkpoint,
)
from deuz_django.core.exceptions import InvalidInputError
from deuz_django.core.messages import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from deuz_django.core.usage import Usage

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vectors"
VECTORS = json.loads((FIXTURES / "codec.json").read_text("utf-8"))


def _restore_bytes(value: Any) -> Any:
    """The vector file writes a restored byte array as ``{"__bytes__": [...], ...}``."""
    if isinstance(value, dict):
        if "__bytes__" in value:
            return bytes(value["__bytes__"])
        return {k: _restore_bytes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore_bytes(v) for v in value]
    return value


def _checkpoint(**overrides: Any) -> AgentCheckpoint:
    fields: dict[str, Any] = {
        "run_id": "r",
        "step_id": "r#1",
        "step_index": 1,
        "status": "running",
        "messages": (Message("user", (TextPart("hi"), ImagePart(b"\x00\xff"))),),
        "usage": Usage(input_tokens=1, output_tokens=1, total_tokens=2),
        "created_at": 7,
    }
    return AgentCheckpoint(**(fields | overrides))


# -- the recorded vectors ------------------------------------------------------------


@pytest.mark.parametrize("case", VECTORS["roundtrip"], ids=lambda c: c["name"])
def test_roundtrip_vector_decodes_to_the_reference_value(case: dict[str, Any]) -> None:
    # SPEC R8.2: deserialize gives the reference's tree, byte arrays as bytes.
    checkpoint = deserialize_checkpoint(case["serialized"])
    assert checkpoint.to_json() == _restore_bytes(case["deserialized"])


@pytest.mark.parametrize("case", VECTORS["roundtrip"], ids=lambda c: c["name"])
def test_roundtrip_vector_reencodes_byte_identical(case: dict[str, Any]) -> None:
    # SPEC R8.1: the codec keeps key order, so the text survives a round trip exactly.
    assert encode_json(decode_json(case["serialized"])) == case["serialized"]


@pytest.mark.parametrize("case", VECTORS["roundtrip"], ids=lambda c: c["name"])
def test_checkpoint_roundtrip_is_byte_identical(case: dict[str, Any]) -> None:
    # SPEC R8.1, R8.6: serialize(deserialize(s)) == s, also for the vector whose
    # pendingApprovals come before usage.
    checkpoint = deserialize_checkpoint(case["serialized"])
    assert serialize_checkpoint(checkpoint) == case["serialized"]


HAND_WRITTEN = (
    '{"createdAt":7,"status":"suspended","runId":"r-hand","version":1,'
    '"messages":[{"content":"hi","role":"user"},'
    '{"content":[{"input":{"b":1,"a":[{"z":0,"y":1}]},"name":"pay","id":"c1",'
    '"type":"tool_use"}],"role":"assistant"}],'
    '"stepIndex":3,"pendingApprovals":[{"toolName":"pay","input":{"b":1,"a":[{"z":0,'
    '"y":1}]},"toolCallId":"c1","approvalId":"c1"}],'
    '"usage":{"totalTokens":2,"cacheWrite1hTokens":0,"cacheWriteTokens":0,'
    '"cachedReadTokens":0,"reasoningTokens":0,"outputTokens":1,"inputTokens":1},'
    '"stepId":"r-hand#3"}'
)


def test_a_hand_written_checkpoint_keeps_its_key_order_at_every_level() -> None:
    # SPEC R8.6, R5.14: a checkpoint assembled by hand round-trips byte for byte.
    checkpoint = deserialize_checkpoint(HAND_WRITTEN)
    assert checkpoint.status == "suspended"
    assert checkpoint.messages[0] == Message("user", "hi")
    assert serialize_checkpoint(checkpoint) == HAND_WRITTEN


def test_key_order_is_not_part_of_a_checkpoints_value() -> None:
    # SPEC R8.6: the order read is kept for writing back; values compare as before.
    read = deserialize_checkpoint(HAND_WRITTEN)
    canonical = deserialize_checkpoint(serialize_checkpoint(replace(read)))
    assert read == canonical
    assert list(json.loads(serialize_checkpoint(replace(read)))) == [
        "version",
        "runId",
        "stepId",
        "stepIndex",
        "status",
        "messages",
        "usage",
        "pendingApprovals",
        "createdAt",
    ]


def test_a_checkpoint_built_in_python_writes_the_saved_order() -> None:
    # SPEC R6.3: the order the loop saves; reading it back changes nothing.
    text = serialize_checkpoint(_checkpoint())
    assert list(json.loads(text)) == [
        "version",
        "runId",
        "stepId",
        "stepIndex",
        "status",
        "messages",
        "usage",
        "createdAt",
    ]
    assert serialize_checkpoint(deserialize_checkpoint(text)) == text


WIRE = json.loads((FIXTURES / "wire.json").read_text("utf-8"))


@pytest.mark.parametrize(
    "name", ["checkpoint_after_leg1", "checkpoint_after_leg2"], ids=str
)
def test_the_wire_vectors_checkpoints_round_trip_byte_for_byte(name: str) -> None:
    # SPEC R8.6: the file holds them parsed; JSON.stringify wrote them compact, in order.
    text = json.dumps(
        WIRE["durable_approval_two_legs"][name],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert serialize_checkpoint(deserialize_checkpoint(text)) == text


# -- what we do not understand survives (docs/interop.md, rule 4) ---------------------

NEWER_REFERENCE = (
    '{"version":1,"runId":"r","stepId":"r#2","stepIndex":2,"status":"suspended",'
    '"traceId":"t-9",'  # an unknown top-level key
    '"messages":[{"role":"user","content":"hi","name":"bob"},'  # unknown message key
    '{"role":"assistant","content":['
    '{"type":"reasoning","text":"t","encrypted":true,"signature":null,"cacheHint":2},'
    '{"type":"tool_use","id":"c1","name":"pay"},'  # no input
    '{"type":"image","image":"https://x/y.png","mediaType":null}]},'
    '{"role":"tool","content":[{"type":"tool_result","toolUseId":"c0","isError":null}]}],'
    '"usage":{"inputTokens":1,"outputTokens":1,"reasoningTokens":0,"cachedReadTokens":0,'
    '"cacheWriteTokens":0,"cacheWrite1hTokens":0,"videoTokens":4,"totalTokens":2},'
    '"pendingApprovals":[],"agentPath":[],"createdAt":7,"leaseHint":null}'
)


def test_unknown_keys_nulls_empty_lists_and_absent_fields_survive_a_round_trip() -> (
    None
):
    # SPEC R8.6: the reference passes all of it through; so do we, byte for byte.
    checkpoint = deserialize_checkpoint(NEWER_REFERENCE)
    assert serialize_checkpoint(checkpoint) == NEWER_REFERENCE
    # ... while the values read are the ones this runtime understands
    assert checkpoint.pending_approvals is None
    assert checkpoint.agent_path is None
    assert checkpoint.usage == Usage(input_tokens=1, output_tokens=1, total_tokens=2)
    assert checkpoint.messages[1].content[1] == ToolUsePart("c1", "pay", None)
    assert checkpoint.messages[2].content[0] == ToolResultPart("c0", None)


def test_unknown_part_fields_survive_a_resume_leg() -> None:
    # The loop carries read messages on, so the next checkpoint keeps their extra keys.
    checkpoint = deserialize_checkpoint(NEWER_REFERENCE)
    next_leg = replace(
        checkpoint, messages=(*checkpoint.messages, Message("user", "go"))
    )
    written = json.loads(serialize_checkpoint(next_leg))
    assert written["messages"][0] == {"role": "user", "content": "hi", "name": "bob"}
    assert written["messages"][1]["content"][0]["cacheHint"] == 2
    assert "input" not in written["messages"][1]["content"][1]
    assert (
        "traceId" not in written
    )  # a new checkpoint is built fresh, as R6.3 builds it


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # rejected: each would make the run wrong; the error names the JSON path
        (("version", 2), r"^checkpoint\.version: unsupported"),
        (
            ("messages", [{"role": "user", "content": [{"type": "video"}]}]),
            r"^checkpoint\.messages\[0\]\.content\[0\]\.type: unknown part type 'video'",
        ),
        (
            ("messages", [{"role": "robot", "content": ""}]),
            r"^checkpoint\.messages\[0\]\.role",
        ),
        (("usage", {"inputTokens": "1"}), r"^checkpoint\.usage\.inputTokens"),
        (
            ("pendingApprovals", [{"approvalId": "a", "toolCallId": 1}]),
            r"^checkpoint\.pendingApprovals\[0\]\.toolCallId",
        ),
    ],
)
def test_what_would_make_the_run_wrong_is_refused_naming_the_path(
    change: tuple[str, Any], message: str
) -> None:
    data = json.loads(NEWER_REFERENCE)
    data[change[0]] = change[1]
    with pytest.raises(InvalidInputError, match=message):
        deserialize_checkpoint(json.dumps(data))


def test_an_integral_float_counts_as_the_integer_javascript_holds() -> None:
    # Rule 3: 1e21 and 2.0 are integers to JavaScript, which writes them 1e+21 and 2.
    text = (
        serialize_checkpoint(_checkpoint())
        .replace('"stepIndex":1', '"stepIndex":2.0')
        .replace('"inputTokens":1', '"inputTokens":1e21')
    )
    checkpoint = deserialize_checkpoint(text)
    assert checkpoint.step_index == 2
    assert type(checkpoint.usage.input_tokens) is int
    assert checkpoint.usage.input_tokens == 10**21
    assert serialize_checkpoint(checkpoint) == text.replace("2.0", "2").replace(
        "1e21", "1e+21"
    )


# -- our own records, in the reference's order (docs/interop.md, rule 2) --------------


def test_usage_writes_optional_counters_before_the_total() -> None:
    # R1.8, R1.9: sum_usage adds audioTokens/serverToolUses, with_total then sets the total.
    usage = Usage(input_tokens=1, total_tokens=1, audio_tokens=2, server_tool_uses=3)
    assert encode_json(usage.to_json()) == (
        '{"inputTokens":1,"outputTokens":0,"reasoningTokens":0,"cachedReadTokens":0,'
        '"cacheWriteTokens":0,"cacheWrite1hTokens":0,"audioTokens":2,"serverToolUses":3,'
        '"totalTokens":1}'
    )


def test_an_encrypted_reasoning_part_writes_encrypted_before_its_signature() -> None:
    # R1.3: {type, text, encrypted: true, signature?}
    part = ReasoningPart("blob", "sig", encrypted=True)
    assert encode_json(part.to_json()) == (
        '{"type":"reasoning","text":"blob","encrypted":true,"signature":"sig"}'
    )


def test_tool_input_keys_are_written_in_javascript_order_everywhere() -> None:
    # Rule 1: {"b": 1, "2": 0} is {"2":0,"b":1} in a checkpoint as in a token.
    checkpoint = _checkpoint(
        messages=(Message("assistant", (ToolUsePart("c1", "t", {"b": 1, "2": 0}),)),)
    )
    assert '"input":{"2":0,"b":1}' in serialize_checkpoint(checkpoint)


@pytest.mark.parametrize("case", VECTORS["deserialize_only"], ids=lambda c: c["name"])
def test_forgiving_base64_decision_table(case: dict[str, Any]) -> None:
    # SPEC R8.2, R8.4: the browser's atob rules decide what becomes bytes.
    assert case["ok"]
    assert decode_json(case["json"]) == _restore_bytes(case["value"])


# -- encoding ------------------------------------------------------------------------


def test_every_byte_like_value_is_tagged_with_padded_standard_base64() -> None:
    # SPEC R8.1: bytes, bytearray and memoryview, anywhere in the tree; tuples are lists.
    value = {"a": b"\xfb\xff", "b": [bytearray(b"\x01")], "c": (memoryview(b""),)}
    assert encode_json(value) == (
        '{"a":{"$deuzBytes":"+/8="},"b":[{"$deuzBytes":"AQ=="}],"c":[{"$deuzBytes":""}]}'
    )


def test_output_is_compact_with_raw_non_ascii() -> None:
    # SPEC R8.1
    assert (
        encode_json({"t": "ü 🚀", "n": [1, None, True]})
        == '{"t":"ü 🚀","n":[1,null,true]}'
    )


@pytest.mark.parametrize(
    ("number", "js"),
    [
        # Each expected text is what Node's JSON.stringify printed for the same double.
        (1.0, "1"),
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (1e-5, "0.00001"),
        (1e-6, "0.000001"),
        (1e16, "10000000000000000"),
        (1.2345678901234568e20, "123456789012345680000"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.1, "0.1"),
        (-1.5e-10, "-1.5e-10"),
        (123.456, "123.456"),
        (2.0**53, "9007199254740992"),
        (-2.5e-9, "-2.5e-9"),
        (0.0001, "0.0001"),
        (math.nan, "null"),
        (math.inf, "null"),
        (-math.inf, "null"),
    ],
)
def test_numbers_are_written_as_javascript_writes_them(number: float, js: str) -> None:
    # SPEC R10.4 (shared with the signer): JSON.stringify's number formatting.
    assert encode_json(number) == js
    assert encode_json({"x": [number]}) == f'{{"x":[{js}]}}'


def test_float_keys_are_written_as_javascript_property_names() -> None:
    assert encode_json({1.5: 1, 1e21: 2, 1e-7: 3}) == '{"1.5":1,"1e+21":2,"1e-7":3}'


def test_a_lone_surrogate_is_escaped_as_well_formed_json_stringify_does() -> None:
    assert encode_json(["\ud800", "ü\udfff"]) == '["\\ud800","ü\\udfff"]'
    assert decode_json(encode_json("\ud800")) == "\ud800"


def test_ints_are_written_exactly() -> None:
    assert encode_json(2**64 + 1) == "18446744073709551617"


def test_big_ints_both_ways_round() -> None:
    # docs/interop.md rule 3. Python -> reference: written exactly; JSON.parse rounds it
    # to the nearest double and the reference saves that double's digits, which read
    # back here unchanged. Reference -> Python: its digits and exponents survive.
    checkpoint = _checkpoint(
        messages=(Message("assistant", (ToolUsePart("c1", "t", {"n": 2**64 + 1}),)),)
    )
    ours = serialize_checkpoint(checkpoint)
    assert '"input":{"n":18446744073709551617}' in ours
    resaved_by_the_reference = ours.replace(
        "18446744073709551617", "18446744073709552000"
    )
    assert (
        serialize_checkpoint(deserialize_checkpoint(resaved_by_the_reference))
        == resaved_by_the_reference
    )
    theirs = ours.replace("18446744073709551617", "1.8446744073709552e+21")
    assert serialize_checkpoint(deserialize_checkpoint(theirs)) == theirs


def test_a_value_json_cannot_hold_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        encode_json({"x": {1}})


def test_checkpoint_with_bytes_round_trips() -> None:
    checkpoint = _checkpoint()
    assert deserialize_checkpoint(serialize_checkpoint(checkpoint)) == checkpoint


# -- decoding ------------------------------------------------------------------------


def test_bytes_input_is_read_as_utf8() -> None:
    text = serialize_checkpoint(_checkpoint())
    assert deserialize_checkpoint(text.encode("utf-8")) == _checkpoint()


@pytest.mark.parametrize(
    ("value", "decoded"),
    [("AQ\tID\r\nBA\f==", b"\x01\x02\x03\x04"), (" AQID ", b"\x01\x02\x03")],
    ids=["every-ascii-whitespace", "surrounding-spaces"],
)
def test_ascii_whitespace_is_ignored_in_a_tag(value: str, decoded: bytes) -> None:
    # SPEC R8.2: TAB, LF, FF, CR and SPACE are stripped.
    assert decode_json(json.dumps({"$deuzBytes": value})) == decoded


@pytest.mark.parametrize(
    "value",
    ["AQ\vID", "AQ\u00a0ID", "AQ\u3000ID", "====", "=", "AQI==="],
    ids=[
        "vertical-tab",
        "nbsp",
        "ideographic-space",
        "only-padding",
        "one-pad",
        "three-pads",
    ],
)
def test_non_ascii_whitespace_and_stray_padding_keep_the_tag_plain(value: str) -> None:
    # SPEC R8.2: only ASCII whitespace is stripped; at most two trailing "=" are dropped.
    assert decode_json(json.dumps({"$deuzBytes": value})) == {"$deuzBytes": value}


@pytest.mark.parametrize(
    "text",
    ["", "{", "not json", '{"version":1,}', "NaN", '{"createdAt":Infinity}'],
)
def test_garbled_text_is_invalid_input(text: str) -> None:
    with pytest.raises(InvalidInputError, match=r"^checkpoint: not valid JSON \("):
        deserialize_checkpoint(text)


def test_bytes_that_are_not_utf8_are_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="not valid JSON"):
        deserialize_checkpoint(b'{"version":1,"runId":"\xff"}')


@pytest.mark.parametrize("text", ["[]", "1", '"checkpoint"', "null"])
def test_a_non_object_is_invalid_input(text: str) -> None:
    with pytest.raises(InvalidInputError, match="checkpoint: expected an object"):
        deserialize_checkpoint(text)


@pytest.mark.parametrize("version", [0, 2, "1", None])
def test_an_unknown_version_is_refused(version: Any) -> None:
    data = json.loads(serialize_checkpoint(_checkpoint()))
    data["version"] = version
    with pytest.raises(
        InvalidInputError, match="unsupported checkpoint schema version"
    ):
        deserialize_checkpoint(json.dumps(data))


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("runId", 1, "checkpoint.runId: expected a string"),
        ("stepIndex", "1", "checkpoint.stepIndex: expected an integer"),
        ("status", "paused", "checkpoint.status"),
        ("messages", {}, "checkpoint.messages: expected a list"),
        ("createdAt", True, "checkpoint.createdAt: expected a number"),
        ("usage", {"inputTokens": 1.5}, "checkpoint.usage.inputTokens"),
    ],
)
def test_a_field_of_the_wrong_type_is_invalid_input(
    key: str, value: Any, message: str
) -> None:
    data = json.loads(serialize_checkpoint(_checkpoint()))
    data[key] = value
    with pytest.raises(InvalidInputError, match=message):
        deserialize_checkpoint(json.dumps(data))


def test_an_image_part_holding_a_non_bytes_tag_is_invalid_input() -> None:
    # SPEC R8.3: a look-alike tag stays a dict, which an image part cannot hold.
    data = json.loads(serialize_checkpoint(_checkpoint()))
    data["messages"][0]["content"][1]["image"] = {"$deuzBytes": "-_8="}
    with pytest.raises(InvalidInputError, match=r"content\[1\]\.image"):
        deserialize_checkpoint(json.dumps(data))


def test_a_non_text_argument_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        deserialize_checkpoint(None)  # type: ignore[arg-type]
