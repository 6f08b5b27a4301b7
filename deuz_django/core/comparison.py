"""Two transcripts lined up step by step, and where they differ — how a replay
(:mod:`deuz_django.core.replay`) shows what another model, prompt or agent version changed.

A step is one assistant turn — its text and its tool calls with their inputs — and the
results that answered the calls. Steps are lined up by their index (the input before the
first assistant turn is the same for a replay and its original, so it is left out).
Within a step a call is matched by tool and input (canonical JSON), in order. A step's
``differences`` say what differs:

- ``"text"``: the assistant's text changed;
- ``"calls"``: a call was made on one side only (each such call is marked ``only_here``);
- ``"results"``: the same call got another result on the other side (or none);
- ``"missing"``: one transcript has no such step (it ended earlier).

>>> comparison = compare_transcripts(original.messages, replay.messages)
>>> comparison.first_divergence  # the index of the first step that differs, or None
1
>>> comparison.to_json()["steps"][1]["differences"]
['calls']

Reasoning is left out: it is not part of what a run did.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .messages import Message, ToolUsePart, coerce_messages
from .replay import answered_calls, call_key


@dataclass(frozen=True, slots=True)
class ComparedCall:
    """One tool call of a step; ``answered`` is False when no result came back (a
    replay's diverging call, which was never executed); ``only_here`` when the other
    transcript's step has no such call."""

    tool_name: str
    input: Any
    result: Any = None
    is_error: bool = False
    answered: bool = False
    only_here: bool = False

    @property
    def key(self) -> str:
        return call_key(self.tool_name, self.input)

    @property
    def outcome(self) -> tuple[bool, Any, bool]:
        return (self.answered, self.result, self.is_error)

    def to_json(self) -> dict[str, Any]:
        return {
            "toolName": self.tool_name,
            "input": self.input,
            "result": self.result,
            "isError": self.is_error,
            "answered": self.answered,
            "onlyHere": self.only_here,
        }


@dataclass(frozen=True, slots=True)
class StepSide:
    """One transcript's side of a step: the assistant's text and its calls."""

    text: str
    calls: tuple[ComparedCall, ...]

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "calls": [call.to_json() for call in self.calls]}


@dataclass(frozen=True, slots=True)
class ComparedStep:
    """The two sides of step ``index`` (``None``: that transcript has no such step)."""

    index: int
    original: StepSide | None
    replay: StepSide | None
    differences: tuple[str, ...] = ()

    @property
    def same(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "same": self.same,
            "differences": list(self.differences),
            "original": None if self.original is None else self.original.to_json(),
            "replay": None if self.replay is None else self.replay.to_json(),
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two transcripts step by step."""

    steps: tuple[ComparedStep, ...]

    @property
    def first_divergence(self) -> int | None:
        """The index of the first step that differs (``None``: none does)."""
        return next((step.index for step in self.steps if not step.same), None)

    @property
    def same(self) -> bool:
        return self.first_divergence is None

    def to_json(self) -> dict[str, Any]:
        return {
            "same": self.same,
            "firstDivergence": self.first_divergence,
            "steps": [step.to_json() for step in self.steps],
        }


def transcript_steps(messages: Iterable[Message | dict[str, Any]]) -> list[StepSide]:
    """A history's steps: each assistant turn's text and calls, with their results."""
    history = coerce_messages(messages)
    pairs = iter(answered_calls(history))  # the calls of the turns below, in order
    steps = []
    for message in history:
        if message.role != "assistant":
            continue
        calls = []
        for _ in (p for p in message.parts if isinstance(p, ToolUsePart)):
            use, result = next(pairs)
            calls.append(
                ComparedCall(
                    use.name,
                    use.input,
                    None if result is None else result.result,
                    bool(result is not None and result.is_error),
                    answered=result is not None,
                )
            )
        steps.append(StepSide(message.text, tuple(calls)))
    return steps


def compare_transcripts(
    original: Iterable[Message | dict[str, Any]],
    replay: Iterable[Message | dict[str, Any]],
) -> Comparison:
    """Line ``replay`` up with ``original``, step by step (see the module's docstring)."""
    left, right = transcript_steps(original), transcript_steps(replay)
    steps = []
    for index in range(max(len(left), len(right))):
        here = left[index] if index < len(left) else None
        there = right[index] if index < len(right) else None
        steps.append(_compare_step(index, here, there))
    return Comparison(tuple(steps))


def _compare_step(
    index: int, original: StepSide | None, replay: StepSide | None
) -> ComparedStep:
    if original is None or replay is None:
        return ComparedStep(index, original, replay, ("missing",))
    left, right, results_differ = _match_calls(original.calls, replay.calls)
    differences = []
    if original.text != replay.text:
        differences.append("text")
    if any(c.only_here for c in (*left, *right)):
        differences.append("calls")
    if results_differ:
        differences.append("results")
    return ComparedStep(
        index,
        replace(original, calls=left),
        replace(replay, calls=right),
        tuple(differences),
    )


def _match_calls(
    original: Sequence[ComparedCall], replay: Sequence[ComparedCall]
) -> tuple[tuple[ComparedCall, ...], tuple[ComparedCall, ...], bool]:
    """Each side's calls with those the other side lacks marked ``only_here``, and
    whether a call made on both sides got another outcome."""
    unmatched = list(range(len(replay)))
    left = []
    results_differ = False
    for call in original:
        twin = next((i for i in unmatched if replay[i].key == call.key), None)
        if twin is None:
            left.append(replace(call, only_here=True))
            continue
        unmatched.remove(twin)
        results_differ = results_differ or replay[twin].outcome != call.outcome
        left.append(call)
    right = tuple(
        replace(call, only_here=True) if i in unmatched else call
        for i, call in enumerate(replay)
    )
    return tuple(left), right, results_differ
