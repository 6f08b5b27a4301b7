"""A tasks worker told to stop (SIGTERM, a deploy) lets its leg finish the tool it is in
and save that boundary, then stops the leg there and releases the lease at once — so the
next worker continues the run without waiting for the lease to lapse, and no completed
step runs twice (issue #12, item 7; the daphne twin is tests/e2e/test_graceful_deploy.py).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from deuz_django import services
from deuz_django.models import Run
from deuz_django.runs.continuing import enqueue_run
from tests.django.agents import slow_agent_steps
from tests.django.processes import manage_env, start_manage, wait_until
from tests.django.run_support import PROMPT, ready_to_resume, tool_results

pytestmark = pytest.mark.django_db(transaction=True)

DB_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


def db_worker(**env: str):  # type: ignore[no-untyped-def]
    return start_manage(
        "db_worker",
        "--no-reload",
        "--no-startup-delay",
        "--interval",
        "0.1",
        DEUZ_TASKS="db",
        **env,
    )


def test_a_stopping_worker_ends_its_leg_at_the_next_boundary_and_hands_the_run_over(
    effects: Callable[[], list[str]],
) -> None:
    run = services.start_run(agent="slow", messages=PROMPT)
    with override_settings(TASKS=DB_TASKS):
        enqueue_run(run.run_id)
    worker = db_worker(DEUZ_TEST_SLOW_STEP="2", DEUZ_TEST_SLOW_SECONDS="1.5")
    wait_until(lambda: "slow:2:start" in effects(), "the leg to enter step 2's tool")

    worker.send_signal(signal.SIGTERM)
    _out, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err

    log = effects()
    assert log.count("slow:2:end") == 1, err  # the tool it was in finished...
    assert "slow:3:start" not in log  # ...and the leg stopped at that boundary
    run.refresh_from_db()
    assert (run.status, run.step_index, run.last_error) == ("running", 2, "")
    assert run.lease_owner == ""  # released, not left to lapse (30 s here)

    successor = db_worker(
        DEUZ_RECOVERY_SWEEPER="1",
        DEUZ_RECOVERY_INTERVAL="0.2",
        DEUZ_LEASE_SECONDS="0.5",
    )
    try:
        wait_until(
            lambda: Run.objects.filter(run_id=run.run_id, status="completed").exists(),
            "the next worker to continue the run",
        )
    finally:
        successor.send_signal(signal.SIGTERM)
        successor.communicate(timeout=30)
    log = effects()
    for step in range(1, slow_agent_steps + 1):
        assert log.count(f"slow:{step}:end") == 1  # no completed step ran twice


def test_a_sigterm_waits_for_a_leg_handed_to_a_thread_to_reach_its_boundary(
    make_user: Callable[..., Any],
    effects: Callable[[], list[str]],
    gate: Path,
    tmp_path: Path,
) -> None:
    """With the immediate backend a sync caller (a script here, a WSGI server's
    request) hands the leg to a thread of its own (``continuation.hand_off``): a SIGTERM
    waits for it as for any leg. The tool it is in finishes, and the leg's next boundary
    — the model's answer to the tool's result — ends the run."""
    run = ready_to_resume(make_user("ann"))
    stopping = tmp_path / "stopping"
    script = (
        "import django, time; django.setup()\n"
        "from pathlib import Path\n"
        "from deuz_django import draining\n"
        "from deuz_django.runs.continuing import enqueue_run\n"
        f"enqueue_run({run.run_id!r})\n"
        "while not draining.stopping(): time.sleep(0.02)\n"
        f"Path({str(stopping)!r}).touch()\n"
        "while True: time.sleep(0.02)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        env=manage_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: "hold:once" in effects(), "the leg to enter its tool")
        child.send_signal(signal.SIGTERM)
        wait_until(stopping.exists, "the process to start draining")
        gate.touch()  # the tool returns; the leg saves that boundary and stops
        _out, err = child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode == -signal.SIGTERM, err
    assert "Traceback" not in err
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.last_error) == ("completed", "", "")
    assert tool_results(run)["h1"] == ("held once", False)
    assert effects() == ["hold:once"]


def test_a_default_sigterm_handling_still_ends_the_process_after_draining() -> None:
    """As an RQ work horse does: after the drain, SIGTERM ends it as it did before (the
    handler is reset from the main thread, the only one that may)."""
    script = (
        "import django, os, signal, time; django.setup()\n"
        "from deuz_django import draining\n"
        "signal.signal(signal.SIGTERM, signal.SIG_DFL); draining.install()\n"
        "os.kill(os.getpid(), signal.SIGTERM); time.sleep(10); print('survived')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=manage_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert "Traceback" not in done.stderr
    assert "survived" not in done.stdout
