"""WebSocket streaming through the journal vs a bare Channels consumer (issue: WS consumer).

Against a real daphne process on this host (SQLite file DB, in-memory channel layer):

1. parts/second from one run to 1 and to 20 concurrent clients through the journal
   (every part journaled before it is sent) vs a bare consumer sending the same frames,
   and the parts lost (must be 0);
2. time to first part: a client subscribing to a finished run until its first replayed
   frame, and ``start`` until the run's first part;
3. how many runs one daphne process streams at once at 50 parts/second each (50 to 300),
   every part delivered, the runs streaming within a second of their start and finishing
   within 10 % of their nominal length; beside them the bare consumer sending a frame
   every 20 ms on as many sockets, the floor of daphne and Channels at that pace.

Each row gives the daphne process's CPU time (user + system, from ``/proc``) per delivered
part; for concurrent runs also with each run's own costs (start, tool step, checkpoints,
release — measured on runs of one part) taken out, which is what streaming costs.
``--baseline REV`` runs the journal variant also on the code as of git revision REV, in
its own daphne, interleaved with the current code's rounds.

Run: .venv/bin/python benchmarks/ws_stream.py [--json] [--quick] [--baseline REV]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from websockets.asyncio.client import ClientConnection, connect

from benchmarks._table import ROOT, code_at, median, report
from tests.live_site import LiveSite, free_port, wait_for_port

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# What a daphne of an older revision imports from that revision: the package, the settings
# and agents of the test site. The benchmark's ASGI app (benchmarks/ws_app.py) is the
# current one, copied beside them: it is the harness, not the code measured.
OLD_TREE = ("deuz_django", "example_project", "tests")

# Sustained: every part arrives, each stream (first part to last) takes at most 10 %
# longer than the model takes to produce it, and runs start streaming within a second of
# being asked: a server that cannot keep up with starts only seems to sustain its streams.
STARTED_WITHIN = 1.0
# Daphne and Channels alone at the streaming pace: the bare consumer sending one frame
# every 20 ms on each socket — no journal, no run, no model.
BARE_PACED = "bare, paced"

TARGET = (
    "≤ 60 µs of server CPU per streamed part; 300 concurrent runs at 50 parts/s "
    "sustained in one daphne process; 0 parts lost; p95 time to first replayed part "
    "< 10 ms"
)


class Server:
    """daphne serving benchmarks.ws_app for a LiveSite — the current code, or the code
    extracted from an older revision (``code``, from ``code_at``)."""

    def __init__(self, site: LiveSite, code: Path | None = None) -> None:
        import subprocess

        env, cwd = site.env, ROOT
        if code is not None:
            # daphne puts its working directory first on sys.path: run it from the old
            # tree, and put that tree first for everything it imports too.
            cwd = code
            env = {**env, "PYTHONPATH": f"{code}:{env.get('PYTHONPATH', '')}"}
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "daphne"),
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "benchmarks.ws_app:application",
            ],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process)
        self.url = f"ws://127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        """User + system CPU time the daphne process has used so far (``/proc``)."""
        stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


async def open_ws(server: Server, path: str, cookie: str) -> ClientConnection:
    return await connect(
        server.url + path,
        additional_headers={"Cookie": cookie},
        proxy=None,
        max_size=None,
        max_queue=None,
        compression=None,
    )


async def drain(
    ws: ClientConnection, *, text_only: bool = False
) -> tuple[set[int], float | None]:
    """Frames until the run's last ``done`` (the one after a ``finish`` that stopped);
    returns the seqs seen and when the first part (or first text delta) arrived. Frames are
    not JSON-decoded:
    the client must not be what limits the measurement."""
    seqs: set[int] = set()
    first: float | None = None
    last_finish = False
    async for message in ws:
        assert isinstance(message, str)
        if '"seq":' not in message:
            continue  # started / subscribed
        head = message[: message.find(',"part"')] if '"part"' in message else message
        seq = int(head[head.rfind('"seq":') + 6 :].split(",")[0].rstrip("}"))
        if '"part"' in message:
            if first is None and (not text_only or '"text-delta"' in message):
                first = time.perf_counter()
            seqs.add(seq)
            last_finish = '"type":"finish"' in message
        elif '"type":"done"' in message:
            seqs.add(seq)
            if last_finish or '"runId":"bare"' in message:
                return seqs, first
    raise RuntimeError("socket closed early")


async def started(ws: ClientConnection) -> str:
    async for message in ws:
        frame = json.loads(message)
        if frame.get("type") == "started":
            return str(frame["runId"])
        if frame.get("type") == "error":
            raise RuntimeError(frame)
    raise RuntimeError("no started frame")


@dataclass(frozen=True, slots=True)
class Round:
    """One measured round: parts/s summed over clients, parts per client, parts lost, and
    the server's CPU time per delivered part."""

    rate: float
    expected: int
    lost: int
    cpu_us: float


async def through_journal(server: Server, cookie: str, clients: int) -> Round:
    sockets = [await open_ws(server, "/ws/deuz/", cookie) for _ in range(clients)]
    cpu0, t0 = server.cpu_seconds(), time.perf_counter()
    await sockets[0].send(
        json.dumps({"type": "start", "agent": "streamer", "text": "go"})
    )
    run_id = await started(sockets[0])
    for ws in sockets[1:]:
        await ws.send(json.dumps({"type": "subscribe", "runId": run_id, "lastSeq": -1}))
    results = await asyncio.gather(*(drain(ws) for ws in sockets))
    elapsed, cpu = time.perf_counter() - t0, server.cpu_seconds() - cpu0
    for ws in sockets:
        await ws.close()
    expected = max(max(seqs) for seqs, _ in results) + 1
    delivered = sum(len(seqs) for seqs, _ in results)
    return Round(
        expected * clients / elapsed,
        expected,
        expected * clients - delivered,
        cpu / delivered * 1e6,
    )


async def bare(server: Server, cookie: str, clients: int, count: int) -> Round:
    sockets = [
        await open_ws(server, f"/ws/bare/?n={count}", cookie) for _ in range(clients)
    ]
    cpu0, t0 = server.cpu_seconds(), time.perf_counter()
    results = await asyncio.gather(*(drain(ws) for ws in sockets))
    elapsed, cpu = time.perf_counter() - t0, server.cpu_seconds() - cpu0
    for ws in sockets:
        await ws.close()
    delivered = sum(len(seqs) for seqs, _ in results)
    return Round(
        (count + 1) * clients / elapsed,
        count + 1,
        (count + 1) * clients - delivered,
        cpu / delivered * 1e6,
    )


async def first_part_latencies(
    server: Server, cookie: str, samples: int
) -> tuple[list[float], list[float]]:
    """ms to the first replayed frame of a finished run, and from start to first part.

    Each sample opens its own socket, as a new tab would (one socket starting dozens of
    runs a second would be — rightly — throttled by the consumer)."""
    replay, live = [], []
    for _ in range(samples):
        ws = await open_ws(server, "/ws/deuz/", cookie)
        t0 = time.perf_counter()
        await ws.send(json.dumps({"type": "start", "agent": "streamer", "text": "go"}))
        run_id = await started(ws)
        _, first = await drain(ws)
        live.append((first - t0) * 1000)  # type: ignore[operator]
        reader = await open_ws(server, "/ws/deuz/", cookie)
        t1 = time.perf_counter()
        await reader.send(
            json.dumps({"type": "subscribe", "runId": run_id, "lastSeq": -1})
        )
        async for message in reader:
            if "part" in json.loads(message):
                replay.append((time.perf_counter() - t1) * 1000)
                break
        await reader.close()
        await ws.close()
    return replay, live


async def concurrent_runs(
    server: Server, cookie: str, runs: int, seconds: float, *, ramp: float = 2.0
) -> dict[str, Any]:
    """``runs`` runs each streaming 50 parts/s for ``seconds``, one client per run, started
    over ``ramp`` seconds (not all in one instant: a thundering herd of starts measures the
    start path, not streaming). The server's CPU per part includes each run's start (run
    row, lease, tool step)."""
    sockets = [await open_ws(server, "/ws/deuz/", cookie) for _ in range(runs)]

    async def start(ws: ClientConnection) -> None:
        await ws.send(json.dumps({"type": "start", "agent": "streamer", "text": "go"}))
        await started(ws)

    return await paced_round(server, sockets, start, ramp=ramp, text_only=True)


async def bare_paced(
    server: Server, cookie: str, runs: int, seconds: float, *, ramp: float = 2.0
) -> dict[str, Any]:
    """The bare consumer's frames at 50 a second on ``runs`` sockets, started as
    :func:`concurrent_runs` starts its runs: what daphne and Channels alone cost at that
    pace, one frame a part."""
    count = int(seconds * 50)
    sockets = [
        await open_ws(server, f"/ws/bare/?n={count}&delay=0.02", cookie)
        for _ in range(runs)
    ]

    async def start(ws: ClientConnection) -> None:
        await ws.send("go")

    return await paced_round(server, sockets, start, ramp=ramp, text_only=False)


async def paced_round(
    server: Server,
    sockets: list[ClientConnection],
    start: Callable[[ClientConnection], Awaitable[None]],
    *,
    ramp: float,
    text_only: bool,
) -> dict[str, Any]:
    """Start a stream on each socket, one after another over ``ramp`` seconds, and
    drain them all; the delivered rate, the server's CPU per part and per stream, the
    p95 time from start to first part and from first part to last, the parts lost."""

    async def one(index: int, ws: ClientConnection) -> tuple[int, int, float, float]:
        await asyncio.sleep(ramp * index / len(sockets))
        asked = time.perf_counter()
        await start(ws)
        seqs, first = await drain(ws, text_only=text_only)
        assert first is not None
        return len(seqs), max(seqs) + 1, first - asked, time.perf_counter() - first

    cpu0, t0 = server.cpu_seconds(), time.perf_counter()
    results = await asyncio.gather(*(one(i, ws) for i, ws in enumerate(sockets)))
    elapsed, cpu = time.perf_counter() - t0, server.cpu_seconds() - cpu0
    for ws in sockets:
        await ws.close()
    delivered = sum(got for got, _, _, _ in results)

    def p95(values: list[float]) -> float:
        return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]

    return {
        "parts/s": delivered / elapsed,
        "server µs/part": cpu / delivered * 1e6,
        "p95 first part s": p95([r[2] for r in results]),
        "p95 stream s": p95([r[3] for r in results]),
        "lost": sum(expected - got for got, expected, _, _ in results),
        "parts/run": delivered / len(sockets),
        "server ms/run": cpu / len(sockets) * 1000,
    }


def site_for(tmp: Path, chunks: int, delay: float) -> LiveSite:
    tmp.mkdir(parents=True, exist_ok=True)
    # DEBUG off, as in production (Django would keep a log of every query otherwise).
    return LiveSite(
        tmp,
        DEUZ_TEST_CHUNKS=str(chunks),
        DEUZ_TEST_CHUNK_DELAY=str(delay),
        DJANGO_DEBUG="0",
    )


@contextlib.asynccontextmanager
async def servers(
    tmp: Path, name: str, variants: dict[str, Path | None], chunks: int, delay: float
) -> AsyncIterator[dict[str, tuple[Server, str]]]:
    """A site and a daphne per variant (name → code, ``None`` for the current code), all
    up at once so their rounds can interleave; each with a signed-in cookie."""
    up: dict[str, tuple[Server, str]] = {}
    sites = []
    try:
        for variant, code in variants.items():
            site = site_for(tmp / f"{name}-{len(sites)}", chunks, delay)
            sites.append(site)
            up[variant] = (Server(site, code), site.user("bench"))
        yield up
    finally:
        for server, _ in up.values():
            server.stop()
        for site in sites:
            site.close()


async def main(quick: bool, baseline: str | None) -> dict[str, list[dict[str, Any]]]:
    chunks = 2000 if quick else 5000
    repeats = 2 if quick else 3
    tables: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as scratch, code_at(baseline, OLD_TREE) as old:
        tmp = Path(scratch)
        variants: dict[str, Path | None] = {"journal": None}
        if old is not None:
            (old / "benchmarks").mkdir(exist_ok=True)
            shutil.copy(ROOT / "benchmarks" / "ws_app.py", old / "benchmarks")
            variants = {f"journal @{baseline}": old, **variants}

        async with servers(tmp, "a", variants, chunks, 0.0) as up:
            bare_server, bare_cookie = up["journal"]
            # A warm-up round of each, not counted: the first legs of a fresh daphne pay
            # for imports, connections and caches, which is not what is compared.
            for server, cookie in up.values():
                warm = await through_journal(server, cookie, 1)
            await bare(bare_server, bare_cookie, 1, warm.expected - 1)
            rows = []
            for clients in (1, 20):
                rounds: dict[str, list[Round]] = {name: [] for name in [*up, "bare"]}
                for _ in range(repeats):
                    for name, (server, cookie) in up.items():
                        rounds[name].append(
                            await through_journal(server, cookie, clients)
                        )
                    expected = rounds["journal"][-1].expected
                    rounds["bare"].append(
                        await bare(bare_server, bare_cookie, clients, expected - 1)
                    )
                for name, measured in rounds.items():
                    rows.append(
                        {
                            "clients": str(clients),
                            "variant": name,
                            "parts/run": measured[-1].expected,
                            "parts/s": median([r.rate for r in measured]),
                            "server µs/part": median([r.cpu_us for r in measured]),
                            "lost": sum(r.lost for r in measured),
                        }
                    )
            tables["parts/second to 1 and 20 clients"] = rows

        async with servers(tmp, "b", variants, 50, 0.0) as up:
            rows = []
            for name, (server, cookie) in up.items():
                replay, live = await first_part_latencies(
                    server, cookie, 20 if quick else 60
                )
                for measure, samples in (
                    ("subscribe → first replayed part", replay),
                    ("start → first part of a new run", live),
                ):
                    rows.append(
                        {
                            "measure": measure,
                            "variant": name,
                            "p50": median(samples),
                            "p95": statistics.quantiles(samples, n=20)[-1],
                        }
                    )
            tables["time to first part (ms)"] = rows

        # What a run costs besides its stream (start, lease, tool step, checkpoints,
        # release): runs that answer with one part, so streaming's share can be told.
        lifecycle: dict[str, float] = {}
        async with servers(tmp, "d", variants, 1, 0.0) as up:
            for name, (server, cookie) in up.items():
                await concurrent_runs(server, cookie, 20, 0.02)  # warm-up
                lifecycle[name] = median(
                    [
                        (await concurrent_runs(server, cookie, 150, 0.02))[
                            "server ms/run"
                        ]
                        for _ in range(repeats)
                    ]
                )

        seconds = 4.0 if quick else 8.0
        async with servers(tmp, "c", variants, int(seconds * 50), 0.02) as up:
            rows = []
            current, current_cookie = up["journal"]
            for runs in (50, 100, 150, 300):
                measured: dict[str, list[dict[str, Any]]] = {
                    name: [] for name in [*up, BARE_PACED]
                }
                for _ in range(1 if quick else repeats):
                    for name, (server, cookie) in up.items():
                        measured[name].append(
                            await concurrent_runs(server, cookie, runs, seconds)
                        )
                    measured[BARE_PACED].append(
                        await bare_paced(current, current_cookie, runs, seconds)
                    )
                for name, results in measured.items():
                    row: dict[str, Any] = {"runs": str(runs), "variant": name}
                    for figure in (
                        "parts/s",
                        "server µs/part",
                        "p95 first part s",
                        "p95 stream s",
                    ):
                        row[figure] = median([r[figure] for r in results])
                    per_run = median([r["parts/run"] for r in results])
                    row["µs/part less run costs"] = row["server µs/part"] - (
                        lifecycle.get(name, 0.0) * 1000 / per_run
                    )
                    row["lost"] = sum(r["lost"] for r in results)
                    row["sustained"] = (
                        "yes"
                        if row["lost"] == 0
                        and row["p95 stream s"] <= seconds * 1.1
                        and row["p95 first part s"] <= STARTED_WITHIN
                        else "no"
                    )
                    rows.append(row)
            tables[
                f"concurrent runs at 50 parts/s each, one client each, one daphne "
                f"(model: {seconds:.0f} s a stream)"
            ] = rows
            tables["a run's costs besides its stream (150 runs of one part)"] = [
                {"variant": name, "server ms/run": ms} for name, ms in lifecycle.items()
            ]
    return tables


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="fewer parts and repeats")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also run the journal variant on the code as of git revision REV",
    )
    args = parser.parse_args()
    report(
        "ws_stream",
        asyncio.run(main(args.quick, args.baseline)),
        target=TARGET,
        as_json=args.json,
    )
