"""The runtime's quick start (docs/runtime.md) works as written: ``examples/quickstart.py``
runs offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_the_quickstart_suspends_then_settles_through_resume() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "leg 1: tool_calls, run run-42 is suspended",
        "  waiting for approval: send_email({'to': 'ana@example.com', 'body': '22°C'})",
        "  signed: True",
        "leg 2: stop, run run-42 is completed",
        "  settled: sent to ana@example.com",
        "  answer: Sent Ana the Oslo weather.",
        "  tokens: this leg 54, whole run 116, boundaries 3",
    ]
