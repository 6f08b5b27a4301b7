"""A process that sweeps deadlines, for the tests that start several at once.

It waits for the file ``DEUZ_TEST_GATE`` (so all start together), sweeps once and
appends every deadline signal it sent, and every run it continued, to the file
``DEUZ_TEST_SIGNALS`` — one ``name:run_id:approval_id`` line each. With ``--die``
it SIGKILLs itself after timing calls out, before continuing their runs.

    python -m tests.reliability.deadline_child [--die]
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import django

GATE_SECONDS = 60.0


def main(die: bool) -> None:
    from deuz_django import signals
    from deuz_django.deadlines import sweep as deadline_sweep
    from deuz_django.models import Approval

    log = os.environ["DEUZ_TEST_SIGNALS"]

    def record(line: str) -> None:
        with open(log, "a", encoding="utf-8") as out:
            out.write(line + "\n")

    def receiver(sender: type, signal: Any, approval: Approval, **kwargs: Any) -> None:
        name = {
            signals.approval_reminder: "reminder",
            signals.approval_escalated: "escalated",
            signals.approval_decided: "decided",
        }[signal]
        record(f"{name}:{approval.run.run_id}:{approval.approval_id}")

    for sent in (
        signals.approval_reminder,
        signals.approval_escalated,
        signals.approval_decided,
    ):
        sent.connect(receiver, weak=False)
    if die:

        def killed(run_id: str) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        deadline_sweep._claim = killed  # type: ignore[assignment]
    gate = os.environ["DEUZ_TEST_GATE"]
    waited = time.monotonic() + GATE_SECONDS
    while not os.path.exists(gate) and time.monotonic() < waited:
        time.sleep(0.005)
    for run_id in deadline_sweep.sweep().continued:
        record(f"continued:{run_id}:")


if __name__ == "__main__":
    django.setup()
    main("--die" in sys.argv[1:])
