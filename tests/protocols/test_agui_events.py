"""Journal records as AG-UI events: what each part becomes, a text message opened by
its first delta and closed by any other part, the same ids on every replay, and the
message a rejoin starts in the middle of."""

from __future__ import annotations

import json
from typing import Any

from deuz_django.protocols.agui.events import EventMapper, open_text_before


def record(**part: Any) -> str:
    return json.dumps(part)


def dumped(events: list[Any]) -> list[dict[str, Any]]:
    return [e.model_dump(by_alias=True, mode="json") for e in events]


def test_text_deltas_are_one_message_closed_by_the_next_part() -> None:
    mapper = EventMapper("t")
    events = [
        *mapper.map(3, record(type="text-delta", text="Hel")),
        *mapper.map(4, record(type="text-delta", text="lo")),
        *mapper.map(5, record(type="step-finish", stepIndex=0)),
    ]
    assert dumped(events) == [
        {"type": "TEXT_MESSAGE_START", "messageId": "t-text-3", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "t-text-3", "delta": "Hel"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "t-text-3", "delta": "lo"},
        {"type": "TEXT_MESSAGE_END", "messageId": "t-text-3"},
    ]


def test_a_tool_call_and_its_result_keep_the_calls_id() -> None:
    mapper = EventMapper("t")
    call = record(type="tool-call", toolCallId="c1", toolName="send", input={"to": "a"})
    result = record(
        type="tool-result", toolCallId="c1", toolName="send", output={"ok": 1}
    )
    assert dumped([*mapper.map(0, call), *mapper.map(1, result)]) == [
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "send"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"to": "a"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "c1-result",
            "toolCallId": "c1",
            "content": '{"ok": 1}',
            "role": "tool",
        },
    ]


def test_data_parts_are_custom_events_and_an_error_fails_the_run() -> None:
    mapper = EventMapper("t")
    [custom] = mapper.map(0, record(type="data-progress", payload={"done": 2}))
    assert dumped([custom]) == [
        {"type": "CUSTOM", "name": "progress", "value": {"done": 2}}
    ]
    [error] = mapper.map(1, record(type="error", message="model down"))
    assert dumped([error]) == [
        {"type": "RUN_ERROR", "message": "model down", "code": "run_failed"}
    ]
    assert mapper.failed


def test_parts_without_an_event_map_to_nothing() -> None:
    mapper = EventMapper("t")
    for kind in ("step-start", "tool-state", "cost", "reasoning-delta", "finish"):
        assert mapper.map(0, record(type=kind)) == []


def test_a_rejoin_reopens_the_message_it_joins_in_the_middle_of() -> None:
    records = [
        (0, record(type="step-start")),
        (1, record(type="text-delta", text="a")),
        (2, record(type="text-delta", text="b")),
    ]
    assert open_text_before(records, 2) == 1
    assert open_text_before(records, 0) is None
    mapper = EventMapper("t", open_text="t-text-1")
    assert dumped(mapper.reopen()) == [
        {"type": "TEXT_MESSAGE_START", "messageId": "t-text-1", "role": "assistant"}
    ]
    [content] = mapper.map(3, record(type="text-delta", text="c"))
    assert content.message_id == "t-text-1"
