"""What a checkpoint save costs as a run's history grows: the Django store's delta writes
against a full-snapshot rewrite of the same history, and against LangGraph's PostgresSaver.

Every step adds two ~1 KB messages (a tool call and its result) to the history, and the
store saves the whole checkpoint — as the loop does at each step boundary. Measured:

- the save cost at steps 10, 50, 200 and 1000 (median of the saves of steps k-4..k over
  three runs), on SQLite (the embedded default: WAL) and PostgreSQL, for
  ``DjangoSessionStore`` (writes the run row and the new messages), for the baseline
  below that rewrites the whole history at every save, and for LangGraph's
  ``PostgresSaver`` given the same history as its ``messages`` channel;
- the bytes a run leaves in the database after 200 and 1000 steps;
- a 200-step run through ``generate_text`` (instant model, ~1 KB tool calls and results)
  with the Django store vs without a session.

The delta store runs 1000 continuous steps; the two baselines run 200 continuous steps,
and at step 1000 they save steps 996..1000 over the history of step 995 (their save cost
depends only on the history's length; a continuous 1000-step LangGraph run would store
~1 GB). Each database backend runs in its own subprocess (Django settings are per
process); PostgreSQL gets a scratch database, dropped afterwards.

``--baseline REV`` also measures the Django store's saves as of git revision ``REV``
(extracted with ``git archive``) in the same run, right after the current code's.

    python benchmarks/store_save.py [--json] [--baseline REV]

``DEUZ_BENCH_PG`` (default ``postgres://postgres@127.0.0.1:5432/postgres``) names the
server; without one reachable the PostgreSQL rows are left out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

from _table import code_at, median_ratio, report, worker_json

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEPS = 1000
BASELINE_STEPS = 200
LOOP_STEPS = 200
RUNS = 3
LOOP_REPEATS = 5
SAVE_AT = (10, 50, 200, 1000)
WINDOW = 5
TARGET = (
    "Django store: save cost at step 1000 within 1.5x of step 10; bytes per run linear "
    "in the history (1000-step run ≈ 5x a 200-step run)"
)
PAYLOAD = 1000


# -- the history ------------------------------------------------------------------------------


def text(length: int, seed: int) -> str:
    """Letters and digits at random: PostgreSQL's TOAST compression would shrink a
    repeated character ~100x and flatter every store that rewrites what it stored."""
    chooser = random.Random(seed)
    return "".join(chooser.choices(string.ascii_letters + string.digits, k=length))


def turn(step: int) -> tuple[Any, Any]:
    """One step's two messages: a ~1 KB tool call and its ~1 KB result."""
    from deuz_django.core import Message, ToolResultPart, ToolUsePart

    call_id = f"call_{step:05d}"
    return (
        Message(
            "assistant",
            (ToolUsePart(call_id, "lookup", {"query": text(PAYLOAD - 60, 2 * step)}),),
        ),
        Message("tool", (ToolResultPart(call_id, text(PAYLOAD, 2 * step + 1)),)),
    )


def histories(steps: int) -> list[tuple[Any, ...]]:
    """The history after each step (index 0 is the input), sharing prefix objects."""
    from deuz_django.core import Message

    history: tuple[Any, ...] = (Message("user", "Look everything up."),)
    out = [history]
    for step in range(1, steps + 1):
        history = (*history, *turn(step))
        out.append(history)
    return out


def checkpoint(run_id: str, step: int, messages: tuple[Any, ...]) -> Any:
    from deuz_django.core import Usage
    from deuz_django.core.durable import AgentCheckpoint

    return AgentCheckpoint(
        run_id=run_id,
        step_id=f"{run_id}#{step}",
        step_index=step,
        status="running",
        messages=messages,
        usage=Usage(input_tokens=step, output_tokens=step, total_tokens=2 * step),
        created_at=time.time_ns() // 1_000_000,
    )


def window(times: dict[int, float], at: int) -> list[float]:
    return [times[s] for s in range(at - WINDOW + 1, at + 1) if s in times]


def at_steps(runs: list[dict[int, float]]) -> dict[str, float | None]:
    """Median save cost (ms) at each SAVE_AT step over all runs' windows."""
    out: dict[str, float | None] = {}
    for at in SAVE_AT:
        samples = [t for times in runs for t in window(times, at)]
        out[str(at)] = statistics.median(samples) * 1000 if samples else None
    return out


# -- one database backend, in its own process --------------------------------------------------


def configure_django(url: str, *, prepared: bool = True) -> None:
    """Django on the database at ``url``, as the example project connects to it;
    ``prepared=False``: with Django's default ``prepare_threshold=None`` instead."""
    import django
    from django.conf import settings

    from example_project.settings import database_from_url

    database = database_from_url(url)
    if not prepared:
        database["OPTIONS"] = {**database.get("OPTIONS", {}), "prepare_threshold": None}
    settings.configure(
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "deuz_django",
        ],
        DATABASES={"default": database},
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        USE_TZ=True,
        DEUZ={},
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class FullSnapshotStore:
    """The baseline: the same tables, but every save deletes and rewrites the history."""

    def save(self, cp: Any) -> None:
        from django.db import transaction
        from django.utils import timezone

        from deuz_django.models import Run, RunMessage
        from deuz_django.storage.history import digest, encode_message

        with transaction.atomic():
            pk = (
                Run.objects.filter(run_id=cp.run_id)
                .values_list("pk", flat=True)
                .first()
            )
            if pk is None:
                pk = Run.objects.create(run_id=cp.run_id).pk
            Run.objects.filter(pk=pk).update(
                status=cp.status,
                step_index=cp.step_index,
                usage=cp.usage.to_json(),
                message_count=len(cp.messages),
                checkpoint_created_at=cp.created_at,
                updated_at=timezone.now(),
            )
            RunMessage.objects.filter(run_id=pk).delete()
            rows = []
            for index, message in enumerate(cp.messages):
                data = encode_message(message)
                rows.append(
                    RunMessage(
                        run_id=pk,
                        index=index,
                        role=message.role,
                        data=data,
                        digest=digest(data),
                    )
                )
            RunMessage.objects.bulk_create(rows, batch_size=500)


def timed_saves(
    store: Any, run_id: str, history: list[tuple[Any, ...]], steps: range
) -> dict[int, float]:
    times = {}
    for step in steps:
        cp = checkpoint(run_id, step, history[step])
        start = time.perf_counter()
        store.save(cp)
        times[step] = time.perf_counter() - start
    return times


def database_bytes() -> int:
    """The database's size on disk (SQLite: file pages after a WAL checkpoint)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.execute("PRAGMA page_count")
            pages = cursor.fetchone()[0]
            cursor.execute("PRAGMA page_size")
            return int(pages * cursor.fetchone()[0])
        cursor.execute(
            "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c "
            "WHERE c.relname LIKE 'deuz_django_%' AND c.relkind = 'r'"
        )
        return int(cursor.fetchone()[0])


def measure_backend(url: str, delta_only: bool) -> dict[str, Any]:
    """All figures for one database; ``delta_only``: the Django store's saves alone (for
    a ``--baseline`` revision)."""
    configure_django(url)
    try:
        from deuz_django.storage.store import DjangoSessionStore
    except ImportError:  # a --baseline revision before issue #29's layout
        from deuz_django.store import DjangoSessionStore  # type: ignore[no-redef]

    history = histories(STEPS)
    delta: list[dict[int, float]] = []
    full: list[dict[int, float]] = []
    sizes: dict[int, int] = {}

    def delta_run(steps: int, run_id: str) -> dict[int, float]:
        before = database_bytes()
        times = timed_saves(DjangoSessionStore(), run_id, history, range(1, steps + 1))
        sizes.setdefault(steps, database_bytes() - before)
        return times

    for round_ in range(RUNS):
        delta.append(delta_run(STEPS, f"delta-{round_}"))
        if delta_only:
            continue
        full.append(
            timed_saves(
                FullSnapshotStore(),
                f"full-{round_}",
                history,
                range(1, BASELINE_STEPS + 1),
            )
        )
        late, run_id = FullSnapshotStore(), f"full-late-{round_}"
        late.save(checkpoint(run_id, STEPS - WINDOW, history[STEPS - WINDOW]))
        full.append(
            timed_saves(late, run_id, history, range(STEPS - WINDOW + 1, STEPS + 1))
        )
    if delta_only:
        return {"delta": at_steps(delta)}
    delta_run(LOOP_STEPS, "delta-200")
    return {
        "delta": at_steps(delta),
        "full": at_steps(full),
        "bytes": {str(k): v for k, v in sorted(sizes.items())},
        "loop": loop_ratio(),
    }


def loop_ratio() -> dict[str, float]:
    """A 200-step run with the Django store vs without a session (ms per run)."""
    from asgiref.sync import sync_to_async
    from loop_overhead import InstantModel

    from deuz_django.core import generate_text, tool
    from deuz_django.core.durable import DurableSession
    from deuz_django.storage.store import DjangoSessionStore

    result = text(PAYLOAD, 0)

    @tool
    async def lookup(query: str) -> str:
        """Returns ~1 KB."""
        return result

    class KilobyteModel(InstantModel):  # type: ignore[misc]
        def __init__(self, steps: int) -> None:
            from deuz_django.core.testing import reply

            super().__init__(steps)
            self.replies = [
                reply(
                    tool_calls=[
                        (f"c{i}", "lookup", {"query": text(PAYLOAD - 60, 2 * i)})
                    ]
                )
                for i in range(steps)
            ]
            self.events = [r.events() for r in self.replies]

    counter = iter(range(10**6))

    async def once(durable: bool) -> float:
        session = (
            DurableSession(DjangoSessionStore(), f"loop-{next(counter)}")
            if durable
            else None
        )
        model = KilobyteModel(LOOP_STEPS)
        start = time.perf_counter()
        outcome = await generate_text(
            model=model,
            prompt="go",
            tools=[lookup],
            max_steps=LOOP_STEPS,
            session=session,
        )
        elapsed = time.perf_counter() - start
        assert len(outcome.steps) == LOOP_STEPS
        return elapsed

    async def all_rounds() -> dict[str, list[float]]:
        timings: dict[str, list[float]] = {"plain": [], "durable": []}
        for _ in range(LOOP_REPEATS):
            timings["plain"].append(await once(False))
            timings["durable"].append(await once(True))
        from django.db import connections

        await sync_to_async(connections.close_all)()
        return timings

    timings = asyncio.run(all_rounds())
    return {
        "plain_ms": statistics.median(timings["plain"]) * 1000,
        "durable_ms": statistics.median(timings["durable"]) * 1000,
        "ratio": median_ratio(timings["durable"], timings["plain"]),
    }


# -- LangGraph's PostgresSaver, same history ------------------------------------------------


def measure_langgraph(url: str) -> dict[str, Any]:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6
    from langgraph.checkpoint.postgres import PostgresSaver

    history = [[m.to_json() for m in h] for h in histories(STEPS)]

    def put(saver: Any, thread: str, step: int) -> float:
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=step))
        cp["channel_values"] = {"messages": history[step]}
        cp["channel_versions"] = {"messages": f"{step:032d}"}
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        start = time.perf_counter()
        saver.put(
            config, cp, {"source": "loop", "step": step}, {"messages": f"{step:032d}"}
        )
        return time.perf_counter() - start

    def total_bytes(saver: Any) -> int:
        with saver.conn.cursor() as cursor:
            cursor.execute(
                "SELECT SUM(pg_total_relation_size(c.oid)) AS size FROM pg_class c "
                "WHERE c.relname LIKE 'checkpoint%' AND c.relkind = 'r'"
            )
            return int(cursor.fetchone()["size"])

    runs: list[dict[int, float]] = []
    sizes: dict[str, int] = {}
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        for round_ in range(RUNS):
            before = total_bytes(saver)
            runs.append(
                {s: put(saver, f"t{round_}", s) for s in range(1, BASELINE_STEPS + 1)}
            )
            sizes.setdefault(str(BASELINE_STEPS), total_bytes(saver) - before)
            thread = f"late{round_}"
            put(saver, thread, STEPS - WINDOW)
            runs.append(
                {s: put(saver, thread, s) for s in range(STEPS - WINDOW + 1, STEPS + 1)}
            )
    return {"saves": at_steps(runs), "bytes": sizes}


# -- the driver ---------------------------------------------------------------------------------


def worker(url: str, baseline: Path | None = None) -> dict[str, Any]:
    """``measure_backend`` in a fresh process: the current package's, or the delta
    saves alone of the ``baseline`` revision's package."""
    flags = ["--code", str(baseline)] if baseline else []
    result: dict[str, Any] = worker_json(__file__, "--worker", url, *flags)
    return result


@contextmanager
def scratch_postgres() -> Iterator[str | None]:
    """A scratch database on the server named by DEUZ_BENCH_PG, dropped afterwards."""
    import psycopg

    server = os.environ.get(
        "DEUZ_BENCH_PG", "postgres://postgres@127.0.0.1:5432/postgres"
    )
    name = f"deuz_bench_{os.getpid()}"
    try:
        admin = psycopg.connect(server, autocommit=True)
    except psycopg.OperationalError as error:
        print(
            f"PostgreSQL unavailable ({error}); its rows are left out.", file=sys.stderr
        )
        yield None
        return
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield urlunparse(urlparse(server)._replace(path=f"/{name}"))
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def growth(row: dict[str, float | None]) -> float | None:
    first, last = row.get("10"), row.get("1000")
    return None if first is None or last is None else last / first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON line")
    parser.add_argument(
        "--baseline", help="also measure the Django store at this git revision"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.code:
            sys.path.insert(0, args.code)
        print(json.dumps(measure_backend(args.worker, delta_only=bool(args.code))))
        return

    results: dict[str, dict[str, Any]] = {}
    baselines: dict[str, dict[str, Any]] = {}
    langgraph: dict[str, Any] | None = None
    with code_at(args.baseline) as old:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
            results["SQLite"] = worker(url)
            if old is not None:
                baselines["SQLite"] = worker(url, old)
        with scratch_postgres() as url:
            if url is not None:
                results["PostgreSQL"] = worker(url)
                if old is not None:
                    baselines["PostgreSQL"] = worker(url, old)
                langgraph = measure_langgraph(url)

    saves: list[dict[str, object]] = []
    for backend, result in results.items():
        versions = [(result, "delta", "Django store (delta)")]
        if backend in baselines:
            label = f"Django store (delta) at {args.baseline}"
            versions.append((baselines[backend], "delta", label))
        for figures, key, label in [*versions, (result, "full", "full snapshot")]:
            row = figures[key]
            saves.append(
                {
                    "store": f"{label}, {backend}",
                    **{f"ms @{k}": row[k] for k in row},
                    "@1000 / @10": growth(row),
                }
            )
    if langgraph is not None:
        row = langgraph["saves"]
        saves.append(
            {
                "store": "LangGraph PostgresSaver",
                **{f"ms @{k}": row[k] for k in row},
                "@1000 / @10": growth(row),
            }
        )

    storage: list[dict[str, object]] = []
    for backend, result in results.items():
        sizes = result["bytes"]
        storage.append(
            {
                "store": f"Django store, {backend}",
                "MB @200 steps": sizes["200"] / 1e6,
                "MB @1000 steps": sizes["1000"] / 1e6,
                "1000 / 200": sizes["1000"] / sizes["200"],
            }
        )
    if langgraph is not None:
        storage.append(
            {
                "store": "LangGraph PostgresSaver",
                "MB @200 steps": langgraph["bytes"]["200"] / 1e6,
                "MB @1000 steps": None,
                "1000 / 200": None,
            }
        )

    loop: list[dict[str, object]] = []
    for backend, result in results.items():
        figures = result["loop"]
        if not loop:
            loop.append(
                {
                    "variant": "not durable",
                    "ms/run": figures["plain_ms"],
                    "× not durable": 1.0,
                }
            )
        loop.append(
            {
                "variant": f"Django store, {backend}",
                "ms/run": figures["durable_ms"],
                "× not durable": figures["ratio"],
            }
        )
    report(
        "store_save",
        {
            "Save cost per step (ms, median of steps k-4..k over 3 runs)": saves,
            "Bytes a run leaves in the database": storage,
            f"A {LOOP_STEPS}-step run through generate_text": loop,
        },
        target=TARGET,
        as_json=args.json,
    )


if __name__ == "__main__":
    main()
