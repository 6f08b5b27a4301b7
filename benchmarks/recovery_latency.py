"""How long a run waits after its process goes away, until another process continues it.

Real processes on one site (its own SQLite file, or PostgreSQL with DATABASE_URL):

- **SIGTERM, daphne**: a leg streams on daphne A while a client on daphne B follows the
  run; A is told to stop (grace 0.3 s): the time from A's exit to the first part of the
  leg B continues with.
- **SIGTERM, worker**: a ``db_worker`` is inside a tool; told to stop, it finishes the
  tool, saves the boundary and queues the run's next leg; the time from its exit until a
  second, idle worker's leg runs the next tool.
- **SIGKILL, worker**: the same worker killed; the second worker's recovery sweep
  (``RECOVERY_INTERVAL`` 0.5 s) continues the run once the lease (2 s) lapsed and the run
  was idle a lease length: the time from the kill to the interrupted tool's re-run.

    python benchmarks/recovery_latency.py [--json] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._table import median, report  # noqa: E402
from tests.live_site import LiveSite  # noqa: E402

LEASE_SECONDS = "2"
TARGET = "SIGTERM: continued within 2 s of the exit (issue #12); SIGKILL: lease + sweep"


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 60) -> float:
    """Poll ``condition`` until truthy; returns the monotonic time it became so."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.005)
    return time.monotonic()


def effects(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def worker(site: LiveSite, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "db_worker",
            "--no-reload",
            "--no-startup-delay",
            "--interval",
            "0.05",
        ],
        cwd=ROOT,
        env={**site.env, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def queue_slow_run(site: LiveSite) -> str:
    return str(
        site.script(
            """
            from deuz_django import services
            from deuz_django.runs.continuing import continue_run
            run = services.start_run(agent="slow", messages=[{"role": "user",
                "content": [{"type": "text", "text": "go"}]}])
            continue_run(run.run_id, in_process=False)
            print(json.dumps(run.run_id))
            """
        )
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def worker_round(site: LiveSite, log: Path, how: signal.Signals) -> float:
    """Seconds from the first worker's end until the run moves on in the second."""
    log.unlink(missing_ok=True)
    first = worker(
        site,
        DEUZ_TEST_SLOW_STEP="2",
        DEUZ_TEST_SLOW_SECONDS="3" if how == signal.SIGTERM else "60",
        DEUZ_SHUTDOWN_GRACE="10",  # the tool it is in may finish
    )
    second: subprocess.Popen[bytes] | None = None
    try:
        run_id = queue_slow_run(site)
        wait_for(lambda: "slow:2:start" in effects(log), "the leg to enter step 2")
        # The second worker starts now (so the first took the leg) and is up before
        # the first one goes away.
        second = worker(site, DEUZ_RECOVERY_SWEEPER="1", DEUZ_RECOVERY_INTERVAL="0.5")
        time.sleep(2)
        first.send_signal(how)
        first.wait(30)
        gone = time.monotonic()
        # SIGTERM: the tool finished and the next step's tool starts in the second
        # worker; SIGKILL: the interrupted tool starts again there.
        moved_on = (
            (lambda: "slow:3:start" in effects(log))
            if how == signal.SIGTERM
            else (lambda: effects(log).count("slow:2:start") == 2)
        )
        continued = wait_for(moved_on, "the second worker to continue the run")
        wait_for(
            lambda: site.run_column(run_id, "status") == "completed", "the run to end"
        )
        return continued - gone
    finally:
        stop(first)
        if second is not None:
            stop(second)


async def next_part(ws: ClientConnection, after: int) -> None:
    async for raw in ws:
        frame = json.loads(raw)
        if frame.get("seq", -1) > after and "part" in frame:
            return


async def daphne_round(site: LiveSite, cookie: str) -> float:
    """Seconds from daphne A's exit to B's first part of the continued leg."""
    a, b = site.daphne(), site.daphne()
    headers = {"Cookie": cookie}
    try:
        async with (
            connect(a.ws, origin=a.http, additional_headers=headers, proxy=None) as wa,  # type: ignore[arg-type]
            connect(b.ws, origin=b.http, additional_headers=headers, proxy=None) as wb,  # type: ignore[arg-type]
        ):
            await wa.send(
                json.dumps({"type": "start", "agent": "streamer", "text": "x"})
            )
            run_id, seq = "", -1
            async for raw in wa:
                frame = json.loads(raw)
                run_id = frame.get("runId", run_id)
                seq = max(seq, frame.get("seq", -1))
                if seq >= 5:
                    break
            await wb.send(json.dumps({"type": "subscribe", "runId": run_id}))
            a.process.send_signal(signal.SIGTERM)
            # B sees A's parts up to the aborted leg's end, then the continued leg's.
            last = -1
            async with asyncio.timeout(30):
                async for raw in wb:
                    frame = json.loads(raw)
                    if frame.get("type") == "done":
                        last = frame["seq"]
                        break
            await asyncio.to_thread(a.process.wait, 30)
            gone = time.monotonic()
            async with asyncio.timeout(30):
                await next_part(wb, last)
            continued = time.monotonic() - gone
            # Let B finish the run, so no later round's recovery sweep picks it up.
            await asyncio.to_thread(
                wait_for,
                lambda: site.run_column(run_id, "status") == "completed",
                "the end",
            )
            return continued
    finally:
        a.stop()
        b.stop()


def main(rounds: int) -> dict[str, list[dict[str, Any]]]:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "effects.log"
        site = LiveSite(
            Path(tmp),
            DEUZ_TASKS="db",
            DEUZ_LEASE_SECONDS=LEASE_SECONDS,
            DEUZ_SHUTDOWN_GRACE="0.3",
            DEUZ_TEST_EFFECTS=str(log),
            DEUZ_TEST_CHUNKS="150",
            DEUZ_TEST_CHUNK_DELAY="0.02",
        )
        site.env["DEUZ_TEST_EFFECTS"] = str(log)  # LiveSite drops the tests' own
        try:
            cookie = site.user("bench")
            timings: dict[str, list[float]] = {
                "SIGTERM, daphne -> daphne": [],
                "SIGTERM, worker -> worker": [],
                "SIGKILL, worker -> worker": [],
            }
            for _ in range(rounds):  # interleaved: noise hits all alike
                timings["SIGTERM, daphne -> daphne"].append(
                    asyncio.run(daphne_round(site, cookie))
                )
                timings["SIGTERM, worker -> worker"].append(
                    worker_round(site, log, signal.SIGTERM)
                )
                timings["SIGKILL, worker -> worker"].append(
                    worker_round(site, log, signal.SIGKILL)
                )
        finally:
            site.close()
    rows = [
        {
            "fault": name,
            "p50 s": median(values),
            "max s": max(values),
            "rounds": len(values),
        }
        for name, values in timings.items()
    ]
    return {f"continued after (lease {LEASE_SECONDS} s, sweep every 0.5 s)": rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    report("recovery_latency", main(args.rounds), target=TARGET, as_json=args.json)
