"""What one step costs in the database: the checkpoint save at its boundary and the step
journal's writes (record the turn, the call started, the call finished), in round trips
and ms at steps 10 and 1000 — next to LangGraph's PostgresSaver and a raw append.

Each step of the simulated leg (under a lease, as a real leg runs) records its model
turn — a ~1 KB tool call — then the call's start and its ~1 KB result, then saves the
checkpoint with the two new messages, in the order the loop writes them. Measured, on
SQLite (the embedded default: WAL) and PostgreSQL:

- ms per write: the median of steps k-4..k over five 1000-step runs, for k = 10, 1000;
- round trips per write at steps k+1 (PostgreSQL: request/response cycles counted in
  libpq's protocol trace; SQLite: statements the library executes, BEGIN and COMMIT
  included — calls into the library in-process, not network round trips);
- the floor: a *raw append* of the same two statements (``UPDATE`` the run row,
  ``INSERT`` the two messages) in one transaction, through the driver with no ORM;
- LangGraph's ``PostgresSaver.put`` given the same history as its ``messages`` channel
  (at step 1000 it saves steps 996..1000 over the history of step 995).

``--baseline REV`` runs the same measurement on the package as of git revision ``REV``
(extracted with ``git archive``), its runs interleaved with the current code's, so old
and new figures come from one run. The database is connected to as the example project
does (psycopg's ``prepare_threshold`` set); on PostgreSQL the current code also runs with
Django's default, prepared statements off.

    python benchmarks/boundary_cost.py [--json] [--baseline REV]

``DEUZ_BENCH_PG`` (default ``postgres://postgres@127.0.0.1:5432/deuz_save``) names the
PostgreSQL database the runs write to (migrated; their rows are deleted afterwards);
without one reachable the PostgreSQL rows are left out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from _table import code_at, report, worker_json
from store_save import checkpoint, configure_django, histories

ROOT = Path(__file__).resolve().parents[1]
STEPS = 1000
RUNS = 5
AT = (10, 1000)
WINDOW = 5
WARM_UP = 30  # steps of a throwaway run first, so step 10 is not a cold connection's
PAYLOAD = 1000
OPS = ("turn", "start", "outcome", "save")
TARGET = (
    "one round trip per checkpoint save on PostgreSQL; save p50 ≤ LangGraph "
    "PostgresSaver at step 10 and ≤ 2× the raw append at steps 10 and 1000"
)
UNPREPARED = "current, prepare_threshold=None (Django's default)"
PG = os.environ.get("DEUZ_BENCH_PG", "postgres://postgres@127.0.0.1:5432/deuz_save")


# -- counting round trips ---------------------------------------------------------------------


def round_trips(raw: Any, write: Callable[[], object]) -> int:
    """What ``write`` sends to the database through the driver connection ``raw``:
    PostgreSQL request/response cycles from libpq's trace, SQLite statements from the
    library's trace callback."""
    if hasattr(raw, "pgconn"):
        from psycopg.pq import Trace

        with tempfile.TemporaryFile() as trace:
            raw.pgconn.trace(trace.fileno())
            raw.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)
            try:
                write()
            finally:
                raw.pgconn.untrace()
            return _cycles(trace)
    statements: list[str] = []
    raw.set_trace_callback(statements.append)
    try:
        write()
    finally:
        raw.set_trace_callback(None)
    return len(statements)


def _cycles(trace: Any) -> int:
    """Frontend messages followed by the backend's answer: one round trip each time the
    direction turns from client to server and back (pipelined messages count once)."""
    trace.seek(0)
    cycles, sending = 0, False
    for line in trace.read().decode(errors="replace").splitlines():
        if line.startswith("F"):
            sending = True
        elif sending and line.startswith("B"):
            cycles, sending = cycles + 1, False
    return cycles


def raw_connection() -> Any:
    from django.db import connection

    connection.ensure_connection()
    return connection.connection


# -- one leg, in its own process ---------------------------------------------------------------


def one_step(store: Any, run_id: str, step: int, history: list[tuple[Any, ...]]) -> Any:
    """The writes of one step in the loop's order, each a (name, thunk) pair."""
    journal = store.step_journal
    assistant, tool = history[step][-2:]
    call_id = assistant.content[0].id
    result = tool.content[0].result
    basis = len(history[step - 1])
    return (
        ("turn", lambda: journal.record_turn(run_id, step, basis, assistant)),
        ("start", lambda: journal.record_start(run_id, step, call_id)),
        (
            "outcome",
            lambda: journal.record_outcome(run_id, step, call_id, result, False),
        ),
        ("save", lambda: store.save(checkpoint(run_id, step, history[step]))),
    )


def measure_leg(history: list[tuple[Any, ...]], steps: int = STEPS) -> dict[str, Any]:
    """A 1000-step leg of the Django store and its step journal, under a lease."""
    from deuz_django.models import Run
    from deuz_django.storage.leases import acquire
    from deuz_django.storage.store import DjangoSessionStore

    run_id = f"bench-{uuid.uuid4().hex}"
    Run.objects.create(run_id=run_id, agent="bench")
    store = DjangoSessionStore(lease=acquire(run_id))
    store.save(checkpoint(run_id, 0, history[0]))
    raw = raw_connection()
    ms: dict[str, dict[int, float]] = {op: {} for op in OPS}
    rt: dict[str, dict[str, int]] = {op: {} for op in OPS}
    for step in range(1, steps + 2):
        counted = step - 1 in AT
        for op, write in one_step(store, run_id, step, history):
            if counted:
                rt[op][str(step - 1)] = round_trips(raw, write)
                continue
            start = time.perf_counter()
            write()
            ms[op][step] = (time.perf_counter() - start) * 1000
    Run.objects.filter(run_id=run_id).delete()
    return {"ms": {op: windows(times) for op, times in ms.items()}, "rt": rt}


def measure_raw(history: list[tuple[Any, ...]]) -> dict[str, Any]:
    """The floor: the save's two statements in one transaction, through the driver."""
    from django.db import connection

    from deuz_django.models import Run, RunMessage
    from deuz_django.storage.history import digest, encode_message

    run = Run.objects.create(run_id=f"bench-raw-{uuid.uuid4().hex}", agent="bench")
    raw = raw_connection()
    mark = "%s" if connection.vendor == "postgresql" else "?"
    update = (
        f"UPDATE {Run._meta.db_table} SET status = {mark}, step_index = {mark}, "
        f"usage = {mark}, message_count = {mark}, checkpoint_created_at = {mark}, "
        f"updated_at = {mark} WHERE id = {mark}"
    )
    insert = (
        f"INSERT INTO {RunMessage._meta.db_table} "
        f'(run_id, "index", role, data, digest) VALUES '
        f"({mark}, {mark}, {mark}, {mark}, {mark}), ({mark}, {mark}, {mark}, {mark}, {mark})"
    )

    def append(step: int) -> None:
        cp = checkpoint(run.run_id, step, history[step])
        values: list[Any] = []
        for index in (len(cp.messages) - 2, len(cp.messages) - 1):
            data = encode_message(cp.messages[index])
            values += [run.pk, index, cp.messages[index].role, data, digest(data)]
        row = [
            cp.status,
            cp.step_index,
            json.dumps(cp.usage.to_json()),
            len(cp.messages),
            cp.created_at,
            datetime.datetime.now(datetime.UTC).isoformat(" "),
            run.pk,
        ]
        if connection.vendor == "postgresql":
            with raw.transaction():
                raw.execute(update, row)
                raw.execute(insert, values)
        else:
            raw.execute("BEGIN IMMEDIATE")
            raw.execute(update, row)
            raw.execute(insert, values)
            raw.execute("COMMIT")

    ms: dict[int, float] = {}
    rt: dict[str, int] = {}
    for step in range(2, STEPS + 2):
        if step - 1 in AT:
            rt[str(step - 1)] = round_trips(raw, partial(append, step))
            continue
        start = time.perf_counter()
        append(step)
        ms[step] = (time.perf_counter() - start) * 1000
    Run.objects.filter(pk=run.pk).delete()
    return {"ms": {"save": windows(ms)}, "rt": {"save": rt}}


def windows(times: dict[int, float]) -> dict[str, list[float]]:
    return {
        str(at): [times[s] for s in range(at - WINDOW + 1, at + 1) if s in times]
        for at in AT
    }


def run_worker(url: str, raw: bool, prepared: bool) -> dict[str, Any]:
    configure_django(url, prepared=prepared)
    history = histories(STEPS + 1)
    measure_leg(history, WARM_UP)  # a fresh connection and process: warm them up
    out = {"leg": measure_leg(history)}
    if raw:
        out["raw"] = measure_raw(history)
    from django.db import connections

    connections.close_all()
    return out


# -- LangGraph's PostgresSaver --------------------------------------------------------------


def measure_langgraph(url: str) -> dict[str, Any]:
    """One round of puts at steps k-4..k (k = 10 continuously; k = 1000 over the
    history of step 995)."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6
    from langgraph.checkpoint.postgres import PostgresSaver

    history = [[m.to_json() for m in h] for h in histories(STEPS + 1)]
    ms: dict[str, list[float]] = {str(at): [] for at in AT}
    rt: dict[str, int] = {}
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()

        def put(thread: str, step: int) -> None:
            cp = empty_checkpoint()
            cp["id"] = str(uuid6(clock_seq=step))
            cp["channel_values"] = {"messages": history[step]}
            cp["channel_versions"] = {"messages": f"{step:032d}"}
            config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            saver.put(
                config,
                cp,
                {"source": "loop", "step": step},
                {"messages": f"{step:032d}"},
            )

        def forget(thread: str) -> None:
            with saver.conn.cursor() as cursor:
                for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
                    cursor.execute(
                        f"DELETE FROM {table} WHERE thread_id = %s", (thread,)
                    )

        for step in range(1, WARM_UP + 1):
            put("bench-warm-up", step)
        forget("bench-warm-up")
        for at in AT:
            thread = f"bench-{uuid.uuid4().hex}"
            first = 1 if at < 100 else at - WINDOW
            for step in range(first, at + 2):
                if step == at + 1:
                    rt[str(at)] = round_trips(saver.conn, partial(put, thread, step))
                    continue
                start = time.perf_counter()
                put(thread, step)
                if step > at - WINDOW:
                    ms[str(at)].append((time.perf_counter() - start) * 1000)
            forget(thread)
    return {"ms": {"save": ms}, "rt": {"save": rt}}


# -- the driver -------------------------------------------------------------------------------


def worker(url: str, code: Path, *flags: str) -> dict[str, Any]:
    result: dict[str, Any] = worker_json(
        __file__, "--worker", url, "--code", str(code), *flags
    )
    return result


def postgres_reachable() -> bool:
    import psycopg

    try:
        psycopg.connect(PG, connect_timeout=3).close()
    except psycopg.OperationalError as error:
        print(
            f"PostgreSQL unavailable ({error}); its rows are left out.", file=sys.stderr
        )
        return False
    return True


def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Pool the runs' samples: medians of ms, the round trips of the first run."""
    return {
        "ms": {
            op: {
                at: statistics.median(s for r in results for s in r["ms"][op][at])
                for at in results[0]["ms"][op]
            }
            for op in results[0]["ms"]
        },
        "rt": results[0]["rt"],
    }


LABELS = {
    "turn": "record turn",
    "start": "call started",
    "outcome": "call finished",
    "save": "checkpoint save",
}


def rows(
    name: str,
    figures: dict[str, Any],
    floor: dict[str, Any],
    langgraph: dict[str, Any] | None,
) -> list[dict[str, object]]:
    """One row per write, the checkpoint save's with its ratios to the raw append and
    LangGraph, and a whole-step row when there is more than the save."""
    out: list[dict[str, object]] = []
    for op, ms in figures["ms"].items():
        rt = figures["rt"][op]
        out.append(
            {
                "write": f"{LABELS[op]} — {name}",
                "ms @10": ms["10"],
                "ms @1000": ms["1000"],
                "RT @10": rt["10"],
                "RT @1000": rt["1000"],
                **ratios(ms if op == "save" else None, floor, langgraph),
            }
        )
    if len(figures["ms"]) > 1:
        out.append(
            {
                "write": f"whole step — {name}",
                **{
                    f"{unit} @{at}": sum(figures[key][op][at] for op in figures[key])
                    for unit, key in (("ms", "ms"), ("RT", "rt"))
                    for at in ("10", "1000")
                },
                **ratios(None, floor, langgraph),
            }
        )
    return out


def ratios(
    ms: dict[str, float] | None, floor: dict[str, Any], langgraph: dict[str, Any] | None
) -> dict[str, float | None]:
    raw, lg = floor["ms"]["save"], langgraph["ms"]["save"] if langgraph else None
    return {
        "× raw @10": ms["10"] / raw["10"] if ms else None,
        "× raw @1000": ms["1000"] / raw["1000"] if ms else None,
        "× LangGraph @10": ms["10"] / lg["10"] if ms and lg else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON line")
    parser.add_argument(
        "--baseline", help="also measure the package at this git revision"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--langgraph", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--unprepared", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        sys.path.insert(0, args.code)
        if args.langgraph:
            print(json.dumps(measure_langgraph(args.worker)))
        else:
            print(json.dumps(run_worker(args.worker, args.raw, not args.unprepared)))
        return

    backends: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp, code_at(args.baseline) as old:
        backends.append(("SQLite", f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"))
        if postgres_reachable():
            backends.append(("PostgreSQL", PG))
        variants: dict[str, tuple[Path, list[str]]] = {"current": (ROOT, ["--raw"])}
        if old is not None:
            variants = {f"at {args.baseline}": (old, []), **variants}
        legs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        floors: dict[str, list[dict[str, Any]]] = {}
        puts: list[dict[str, Any]] = []
        for backend, url in backends:
            for_backend = dict(variants)
            if backend == "PostgreSQL":
                for_backend[UNPREPARED] = (ROOT, ["--unprepared"])
            for _ in range(RUNS):
                for variant, (code, flags) in for_backend.items():
                    result = worker(url, code, *flags)
                    legs.setdefault((variant, backend), []).append(result["leg"])
                    if "raw" in result:
                        floors.setdefault(backend, []).append(result["raw"])
                if backend == "PostgreSQL":
                    puts.append(worker(url, ROOT, "--langgraph"))
        langgraph = merge(puts) if puts else None

    table: list[dict[str, object]] = []
    for backend, _ in backends:
        floor = merge(floors[backend])
        versus = langgraph if backend == "PostgreSQL" else None
        for variant in [v for v, b in legs if b == backend]:
            name = f"{variant}, {backend}"
            table += rows(name, merge(legs[(variant, backend)]), floor, versus)
        table += rows(f"raw append, {backend}", floor, floor, versus)
    if langgraph is not None:
        table += rows(
            "LangGraph PostgresSaver", langgraph, merge(floors["PostgreSQL"]), langgraph
        )
    report(
        "boundary_cost",
        {"Per write (ms: median of steps k-4..k over 5 runs; RT: round trips)": table},
        target=TARGET,
        as_json=args.json,
    )


if __name__ == "__main__":
    main()
