"""What steering costs a run that is never steered: the input queue's read at every
step boundary (issue #30).

A 100-step durable run (instant model, one no-op call a step) on the Django store, with
its input queue — one indexed ``SELECT … LIMIT 1`` that finds nothing, a step — and
with that read answered "nothing" without asking the database (everything else of the
queue, such as the save's completion check, stays).
The two run interleaved, in one process per database, on SQLite (a WAL file, the
embedded default) and PostgreSQL; the queue's read is also timed alone.

    python benchmarks/steering_read.py [--json]

``DEUZ_BENCH_PG`` (default ``postgres://postgres@127.0.0.1:5432/deuz_save``) names the
PostgreSQL database (migrated; the runs' rows are deleted afterwards); without one
reachable its rows are left out.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _table import interleaved, median, median_ratio, parse_args, report, worker_json
from boundary_cost import PG, postgres_reachable
from loop_overhead import InstantModel, noop
from store_save import configure_django

STEPS = 100
ROUNDS = 15
READS = 2000
TARGET = "the queue's read adds ≤ 5 % to a step of a durable run"


def _leg_seconds(with_queue: bool) -> float:
    """Seconds per step of one durable run, its queue read at each boundary or not."""
    from deuz_django.core import generate_text
    from deuz_django.core.durable import DurableSession
    from deuz_django.storage.store import DjangoSessionStore

    store = DjangoSessionStore()
    if not with_queue:
        store.input_queue = _unread_queue()(run_pk=store.input_queue.run_pk)
    run_id = f"bench-{uuid.uuid4().hex}"
    session = DurableSession(store=store, run_id=run_id)
    model = InstantModel(STEPS)
    start = time.perf_counter()
    result = asyncio.run(
        generate_text(
            model=model, prompt="go", tools=[noop], max_steps=STEPS, session=session
        )
    )
    elapsed = time.perf_counter() - start
    assert len(result.steps) == STEPS
    return elapsed / STEPS


def _unread_queue() -> type:
    from deuz_django.storage.inputs import DjangoInputQueue

    class Unread(DjangoInputQueue):
        """The queue, but its read at a boundary finds nothing without asking."""

        async def apending(self, run_id: str) -> tuple[()]:
            return ()

    return Unread


def _read_seconds() -> float:
    """Seconds per read of an empty queue (the call the loop makes, async)."""
    from deuz_django.models import Run
    from deuz_django.storage.inputs import DjangoInputQueue

    run = Run.objects.create(run_id=f"bench-{uuid.uuid4().hex}", status="running")
    queue = DjangoInputQueue()

    async def reads() -> float:
        start = time.perf_counter()
        for _ in range(READS):
            assert await queue.apending(run.run_id) == ()
        return (time.perf_counter() - start) / READS

    return asyncio.run(reads())


def worker(url: str) -> None:
    """One database's figures, printed as a JSON line."""
    configure_django(url)
    from deuz_django.models import Run

    _leg_seconds(True)  # warm up: a first connection, the ORM's compiled queries
    timings = interleaved(
        {"queue": lambda: _leg_seconds(True), "none": lambda: _leg_seconds(False)},
        ROUNDS,
    )
    read = median([_read_seconds() for _ in range(5)])
    Run.objects.filter(run_id__startswith="bench-").delete()
    print(json.dumps({**timings, "read": read}))


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    databases = {"SQLite": f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.sqlite3'}"}
    if postgres_reachable():
        databases["PostgreSQL"] = PG
    rows = []
    for name, url in databases.items():
        got = worker_json(__file__, "--worker", url)
        queue, none = median(got["queue"]), median(got["none"])
        rows.append(
            {
                "database": name,
                "step, no queue (ms)": round(none * 1000, 3),
                "step, with queue (ms)": round(queue * 1000, 3),
                "added per step (µs)": round((queue - none) * 1e6, 1),
                "× no queue": round(median_ratio(got["queue"], got["none"]), 3),
                "queue read alone (µs)": round(got["read"] * 1e6, 1),
            }
        )
    report("steering_read", {"per step": rows}, target=TARGET, as_json=args.json)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2])
    else:
        main()
