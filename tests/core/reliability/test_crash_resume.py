"""A durable run survives a SIGKILL mid-step (SPEC R7.7; DESIGN §7).

A real child process runs a four-step durable run against a file store and is killed in
step 3 — inside its slow tool, or inside its model call. A second process resumes from the
last checkpoint. Every side effect is logged to a file, so the test sees exactly what ran,
in which process: steps 1–2 never run again, step 3 (the recovery unit) runs again, and the
final history holds every message exactly once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deuz_django.core import Message, TextPart, ToolResultPart, ToolUsePart
from deuz_django.core.durable import AgentCheckpoint

from .crash_worker import FINAL_TEXT, PROMPT, RUN_ID, FileSessionStore

ROOT = Path(__file__).parents[3]
# A guard against a wedged child, not a measurement: the marker normally shows in < 1 s.
STARTUP_GUARD_SECONDS = 120.0


def _worker(mode: str, store_dir: Path, log: Path, hang_in: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tests.core.reliability.crash_worker",
        mode,
        str(store_dir),
        str(log),
        hang_in,
    ]


def _lines(log: Path) -> list[str]:
    return log.read_text("utf-8").splitlines() if log.exists() else []


def _wait_for_line(child: subprocess.Popen[bytes], log: Path, line: str) -> None:
    give_up = time.monotonic() + STARTUP_GUARD_SECONDS
    while line not in _lines(log):
        if child.poll() is not None:
            _, stderr = child.communicate()
            pytest.fail(f"the child exited ({child.returncode}) early: {stderr!r}")
        if time.monotonic() > give_up:
            child.kill()
            child.wait()
            pytest.fail(f"the child never logged {line!r}; log: {_lines(log)}")
        time.sleep(0.02)


def _expected_transcript() -> list[Message]:
    def tool_step(n: int, name: str, result: str) -> list[Message]:
        return [
            Message("assistant", (ToolUsePart(f"call_{n}", name, {"n": n}),)),
            Message("tool", (ToolResultPart(f"call_{n}", result),)),
        ]

    return [
        Message("user", PROMPT),
        *tool_step(1, "record", "recorded 1"),
        *tool_step(2, "record", "recorded 2"),
        *tool_step(3, "slow", "slow 3 finished"),
        Message("assistant", (TextPart(FINAL_TEXT),)),
    ]


def _load(store_dir: Path, log: Path) -> AgentCheckpoint | None:
    return FileSessionStore(store_dir, log, "test").load(RUN_ID)


@pytest.mark.parametrize(
    ("hang_in", "marker", "interrupted_effects"),
    [
        ("tool", "start slow 3", ["start model 2", "start slow 3"]),
        ("model", "start model 2", ["start model 2"]),
    ],
)
def test_a_run_killed_mid_step_resumes_without_repeating_completed_steps(
    tmp_path: Path, hang_in: str, marker: str, interrupted_effects: list[str]
) -> None:
    # SPEC R7.7, R6.6, R6.7: the recovery unit is one step.
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    log = tmp_path / "effects.log"
    child = subprocess.Popen(
        _worker("start", store_dir, log, hang_in),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _wait_for_line(child, log, marker)
    child.send_signal(signal.SIGKILL)
    child.communicate()
    assert child.returncode == -signal.SIGKILL

    at_crash = _load(store_dir, log)
    assert at_crash is not None
    assert (at_crash.status, at_crash.step_index) == ("running", 2)
    assert list(at_crash.messages) == _expected_transcript()[:5]
    assert list(store_dir.glob(".*.tmp")) == []

    resumed = subprocess.run(
        _worker("resume", store_dir, log, hang_in),
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr.decode()

    assert _lines(log) == [
        "start model 0",
        "start record 1",
        "start save 1 running",
        "start model 1",
        "start record 2",
        "start save 2 running",
        *interrupted_effects,
        # The resumed leg continues the step counter (R7.5) and replays step 3 only.
        "resume model 2",
        "resume slow 3",
        "resume save 3 running",
        "resume model 3",
        "resume save 4 completed",
    ]
    final = _load(store_dir, log)
    assert final is not None
    assert (final.status, final.step_index, final.step_id) == (
        "completed",
        4,
        f"{RUN_ID}#4",
    )
    assert list(final.messages) == _expected_transcript()
    # Steps 1–2 from the first process, steps 3–4 from the second; the killed attempt
    # at step 3 was never checkpointed, so its usage is not counted.
    assert (final.usage.input_tokens, final.usage.output_tokens) == (100, 10)
    assert final.usage.total_tokens == 110
