"""Two transcripts lined up step by step, with what differs marked
(deuz_django.core.comparison)."""

from __future__ import annotations

from typing import Any

from deuz_django.core import Message, TextPart, ToolResultPart, ToolUsePart
from deuz_django.core import compare_transcripts as compare

INPUT = [Message("system", "Be brief."), Message("user", "Weather in Oslo?")]


def _turn(text: str, *calls: tuple[str, str, Any]) -> Message:
    parts: list[Any] = [TextPart(text)] if text else []
    parts += [ToolUsePart(i, name, args) for i, name, args in calls]
    return Message("assistant", tuple(parts))


def _results(*results: tuple[str, Any]) -> Message:
    return Message("tool", tuple(ToolResultPart(i, r) for i, r in results))


ORIGINAL = [
    *INPUT,
    _turn("Looking.", ("c1", "lookup", {"city": "Oslo"})),
    _results(("c1", "rain")),
    _turn("Rain in Oslo."),
]


def test_identical_transcripts_do_not_diverge() -> None:
    comparison = compare(ORIGINAL, ORIGINAL)
    assert comparison.same
    assert comparison.first_divergence is None
    assert [step.differences for step in comparison.steps] == [(), ()]


def test_a_changed_text_is_marked_at_its_step() -> None:
    replay = [*ORIGINAL[:-1], _turn("It rains.")]
    comparison = compare(ORIGINAL, replay)
    assert comparison.first_divergence == 1
    assert comparison.steps[1].differences == ("text",)


def test_a_call_made_only_by_the_replay_is_marked_and_unanswered() -> None:
    # The replay's diverging call: never executed, so it has no result.
    replay = [*INPUT, _turn("Emailing.", ("r1", "send_email", {"to": "ann"}))]
    step = compare(ORIGINAL, replay).steps[0]
    assert step.differences == ("text", "calls")
    assert step.original is not None
    assert step.replay is not None
    assert [c.only_here for c in step.original.calls] == [True]
    (call,) = step.replay.calls
    assert (call.tool_name, call.only_here, call.answered) == (
        "send_email",
        True,
        False,
    )


def test_a_step_only_one_transcript_has_is_missing_on_the_other() -> None:
    replay = ORIGINAL[:4]
    step = compare(ORIGINAL, replay).steps[1]
    assert (step.differences, step.replay) == (("missing",), None)


def test_the_same_call_with_another_result_is_a_result_difference() -> None:
    replay = [*ORIGINAL[:3], _results(("c1", "sun")), ORIGINAL[-1]]
    assert compare(ORIGINAL, replay).steps[0].differences == ("results",)


def test_calls_match_by_input_whatever_its_key_order() -> None:
    original = [*INPUT, _turn("", ("c1", "f", {"a": 1, "b": 2})), _results(("c1", 0))]
    replay = [*INPUT, _turn("", ("x", "f", {"b": 2, "a": 1})), _results(("x", 0))]
    assert compare(original, replay).same


def test_the_json_form_names_each_side_of_each_step() -> None:
    body = compare(ORIGINAL, [*ORIGINAL[:-1], _turn("Sun.")]).to_json()
    assert body["same"] is False
    assert body["firstDivergence"] == 1
    assert body["steps"][0]["original"]["calls"][0] == {
        "toolName": "lookup",
        "input": {"city": "Oslo"},
        "result": "rain",
        "isError": False,
        "answered": True,
        "onlyHere": False,
    }
    assert body["steps"][1]["replay"] == {"text": "Sun.", "calls": []}
