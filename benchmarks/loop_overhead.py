"""Loop overhead per step: an instant scripted model and a no-op async tool.

One run of N steps (``max_steps=N``, every step one tool call) through ``generate_text``
and through ``stream_chat``, for N = 10, 100, 1000. Then the per-step cost at the start and
at the end of a 1000-step run, beside the cost of the one O(n) thing a step must do: build
the new history tuple (twice a step: the assistant turn, then the tool results). The last
row repeats the end window with the package's ``ScriptedModel``, which records every
request — and so keeps every history tuple alive, O(n²) memory over a run.

    python benchmarks/loop_overhead.py [--json]
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable

from _table import interleaved, median, median_ratio, parse_args, report

from deuz_django.core import (
    FinishPart,
    Message,
    ModelEvent,
    ModelRequest,
    generate_text,
    stream_chat,
    tool,
)
from deuz_django.core.testing import ScriptedModel, reply

SIZES = (10, 100, 1000)
REPEATS = {10: 31, 100: 11, 1000: 5}
PROFILE_REPEATS = 9
WINDOW = 100  # steps averaged at each end of the 1000-step run


@tool
async def noop() -> None:
    """Does nothing."""


class InstantModel:
    """Replays step ``i``'s precomputed events (one call to ``noop``); keeps nothing."""

    def __init__(self, steps: int) -> None:
        self.replies = [reply(tool_calls=[(f"c{i}", "noop", {})]) for i in range(steps)]
        self.events = [r.events() for r in self.replies]
        self.finish = FinishPart("tool_calls", self.replies[0].usage)
        self.calls = 0

    @property
    def model_id(self) -> str:
        return "instant"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        events = self.events[self.calls]
        self.calls += 1
        for event in events:
            yield event
        yield self.finish


def _options(model: object, steps: int) -> dict[str, object]:
    return {"model": model, "prompt": "go", "tools": [noop], "max_steps": steps}


async def _generate(steps: int) -> float:
    options = _options(InstantModel(steps), steps)
    start = time.perf_counter()
    result = await generate_text(**options)
    elapsed = time.perf_counter() - start
    assert len(result.steps) == steps
    return elapsed


async def _stream(steps: int) -> float:
    options = _options(InstantModel(steps), steps)
    start = time.perf_counter()
    stream = stream_chat(**options)
    async for _ in stream.full_stream:
        pass
    elapsed = time.perf_counter() - start
    assert await stream.finish_reason == "tool_calls"
    return elapsed


class StampedModel:
    """A model stamping ``perf_counter`` as each step's model call starts."""

    def __init__(self, inner: InstantModel | ScriptedModel) -> None:
        self.inner = inner
        self.stamps: list[float] = []

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.stamps.append(time.perf_counter())
        async for event in self.inner.stream(request):
            yield event


async def _profile(
    inner: InstantModel | ScriptedModel, steps: int
) -> tuple[float, float, tuple[Message, ...]]:
    """Mean seconds per step over the first and the last ``WINDOW`` steps, and the
    run's final history."""
    model = StampedModel(inner)
    result = await generate_text(**_options(model, steps))
    end = time.perf_counter()
    durations = [b - a for a, b in itertools.pairwise([*model.stamps, end])]
    return (
        sum(durations[:WINDOW]) / WINDOW,
        sum(durations[-WINDOW:]) / WINDOW,
        result.messages,
    )


def _append_seconds(history: tuple[Message, ...]) -> float:
    """What ``(*history, message)`` costs, on the run's own message objects (median)."""
    message = Message("assistant", "y")
    rounds = 500

    def once() -> float:
        start = time.perf_counter()
        for _ in range(rounds):
            _ = (*history, message)
        return (time.perf_counter() - start) / rounds

    return median([once() for _ in range(9)])


def _run(coroutine: Callable[[int], object], steps: int) -> Callable[[], float]:
    return lambda: asyncio.run(coroutine(steps))


def main() -> None:
    args = parse_args(__doc__ or "")
    throughput = []
    for steps in SIZES:
        t = interleaved(
            {
                "generate_text": _run(_generate, steps),
                "stream_chat": _run(_stream, steps),
            },
            REPEATS[steps],
        )
        throughput.append(
            {
                "steps": steps,
                "generate_text steps/s": steps / median(t["generate_text"]),
                "stream_chat steps/s": steps / median(t["stream_chat"]),
                "generate µs/step": median(t["generate_text"]) / steps * 1e6,
                "stream µs/step": median(t["stream_chat"]) / steps * 1e6,
                "stream/generate": median_ratio(t["stream_chat"], t["generate_text"]),
            }
        )

    steps = SIZES[-1]
    early, late, late_scripted = [], [], []
    history: tuple[Message, ...] = ()
    for _ in range(PROFILE_REPEATS):
        first, last, history = asyncio.run(_profile(InstantModel(steps), steps))
        early.append(first)
        late.append(last)
        scripted = ScriptedModel(InstantModel(steps).replies)
        late_scripted.append(asyncio.run(_profile(scripted, steps))[1])
    # Around step k the history holds 2k - 1 messages, and the step copies it twice:
    # price the copies at the middle step of each window.
    middle_early, middle_late = WINDOW // 2, steps - WINDOW // 2
    copy_early = 2 * _append_seconds(history[: 2 * middle_early - 1])
    copy_late = 2 * _append_seconds(history[: 2 * middle_late - 1])
    profile = [
        {
            "window": f"steps 1–{WINDOW}",
            "µs/step": median(early) * 1e6,
            "history copies µs/step": copy_early * 1e6,
        },
        {
            "window": f"steps {steps - WINDOW + 1}–{steps}",
            "µs/step": median(late) * 1e6,
            "history copies µs/step": copy_late * 1e6,
        },
        {
            "window": "growth (end − start)",
            "µs/step": median([b - a for a, b in zip(early, late, strict=True)]) * 1e6,
            "history copies µs/step": (copy_late - copy_early) * 1e6,
        },
        {
            "window": f"steps {steps - WINDOW + 1}–{steps}, ScriptedModel",
            "µs/step": median(late_scripted) * 1e6,
            "history copies µs/step": copy_late * 1e6,
        },
    ]
    report(
        "loop_overhead",
        {
            "Throughput (one run of N steps, instant model, no-op async tool)": (
                throughput
            ),
            "Per-step cost across a 1000-step run (generate_text)": profile,
        },
        target=(
            "per-step cost flat across the run, apart from the O(n) history tuple "
            "copies (two a step)"
        ),
        as_json=args.json,
    )


if __name__ == "__main__":
    main()
