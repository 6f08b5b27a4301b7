"""WebSocket streaming through the journal vs a bare Channels consumer (issue: WS consumer).

Against a real daphne process on this host (SQLite file DB, in-memory channel layer):

1. parts/second from one run to 1 and to 20 concurrent clients through the journal
   (every part journaled before it is sent) vs a bare consumer sending the same frames,
   and the parts lost (must be 0);
2. time to first part: a client subscribing to a finished run until its first replayed
   frame, and ``start`` until the run's first part;
3. how many runs one daphne process streams at once at 50 parts/second each, every part
   delivered and the runs finishing within 25 % of their nominal length.

Run: .venv/bin/python benchmarks/ws_stream.py [--json] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from websockets.asyncio.client import ClientConnection, connect

from benchmarks._table import report
from tests.live_site import LiveSite, free_port, wait_for_port

TARGET = (
    "journal ≥ 0.5x the bare consumer's parts/s with 0 parts lost; p95 time to first "
    "replayed part < 10 ms; ≥ 100 concurrent runs at 50 parts/s in one daphne process"
)


class Server:
    """daphne serving benchmarks.ws_app for a LiveSite."""

    def __init__(self, site: LiveSite) -> None:
        import subprocess

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
            cwd=Path(__file__).resolve().parent.parent,
            env=site.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process)
        self.url = f"ws://127.0.0.1:{self.port}"

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


async def through_journal(
    server: Server, cookie: str, clients: int
) -> tuple[float, int, int]:
    """parts/s summed over clients, parts expected per client, parts lost in total."""
    sockets = [await open_ws(server, "/ws/deuz/", cookie) for _ in range(clients)]
    t0 = time.perf_counter()
    await sockets[0].send(
        json.dumps({"type": "start", "agent": "streamer", "text": "go"})
    )
    run_id = await started(sockets[0])
    for ws in sockets[1:]:
        await ws.send(json.dumps({"type": "subscribe", "runId": run_id, "lastSeq": -1}))
    results = await asyncio.gather(*(drain(ws) for ws in sockets))
    elapsed = time.perf_counter() - t0
    for ws in sockets:
        await ws.close()
    expected = max(max(seqs) for seqs, _ in results) + 1
    lost = sum(expected - len(seqs) for seqs, _ in results)
    return expected * clients / elapsed, expected, lost


async def bare(
    server: Server, cookie: str, clients: int, count: int
) -> tuple[float, int]:
    t0 = time.perf_counter()
    sockets = [
        await open_ws(server, f"/ws/bare/?n={count}", cookie) for _ in range(clients)
    ]
    results = await asyncio.gather(*(drain(ws) for ws in sockets))
    elapsed = time.perf_counter() - t0
    for ws in sockets:
        await ws.close()
    lost = sum(count + 1 - len(seqs) for seqs, _ in results)
    return (count + 1) * clients / elapsed, lost


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
    start path, not streaming). Sustained: every part arrives and each run's stream — first
    part to last — takes at most 10 % longer than the model takes to produce it."""
    sockets = [await open_ws(server, "/ws/deuz/", cookie) for _ in range(runs)]

    async def one(index: int, ws: ClientConnection) -> tuple[int, int, float]:
        await asyncio.sleep(ramp * index / runs)
        await ws.send(json.dumps({"type": "start", "agent": "streamer", "text": "go"}))
        await started(ws)
        seqs, first = await drain(ws, text_only=True)
        assert first is not None
        return len(seqs), max(seqs) + 1, time.perf_counter() - first

    t0 = time.perf_counter()
    results = await asyncio.gather(*(one(i, ws) for i, ws in enumerate(sockets)))
    elapsed = time.perf_counter() - t0
    for ws in sockets:
        await ws.close()
    streams = [d for _, _, d in results]
    p95 = statistics.quantiles(streams, n=20)[-1] if runs > 1 else streams[0]
    lost = sum(expected - got for got, expected, _ in results)
    return {
        "runs": runs,
        "parts/s delivered": sum(got for got, _, _ in results) / elapsed,
        "p95 stream seconds": p95,
        "model seconds": seconds,
        "lost": lost,
        "sustained": lost == 0 and p95 <= seconds * 1.1,
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


async def main(quick: bool) -> dict[str, list[dict[str, Any]]]:
    chunks = 2000 if quick else 5000
    repeats = 2 if quick else 3
    tables: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        site = site_for(Path(tmp) / "a", chunks, 0.0)
        server = Server(site)
        cookie = site.user("bench")
        try:
            rows = []
            # A warm-up round of each, not counted: the first legs of a fresh daphne pay
            # for imports, connections and caches, which is not what is compared.
            _, warm_parts, _ = await through_journal(server, cookie, 1)
            await bare(server, cookie, 1, warm_parts - 1)
            for clients in (1, 20):
                journal_rates, bare_rates, lost_j, lost_b = [], [], 0, 0
                for _ in range(repeats):
                    rate, expected, lost = await through_journal(
                        server, cookie, clients
                    )
                    journal_rates.append(rate)
                    lost_j += lost
                    rate_b, lost = await bare(server, cookie, clients, expected - 1)
                    bare_rates.append(rate_b)
                    lost_b += lost
                ratio = statistics.median(
                    j / b for j, b in zip(journal_rates, bare_rates, strict=True)
                )
                rows.append(
                    {
                        "clients": str(clients),
                        "parts/run": expected,
                        "journal parts/s": statistics.median(journal_rates),
                        "bare parts/s": statistics.median(bare_rates),
                        "journal/bare": ratio,
                        "lost (journal)": lost_j,
                        "lost (bare)": lost_b,
                    }
                )
            tables["parts/second to 1 and 20 clients"] = rows
        finally:
            server.stop()
            site.close()

        site = site_for(Path(tmp) / "b", 50, 0.0)
        server = Server(site)
        cookie = site.user("bench")
        try:
            replay, live = await first_part_latencies(
                server, cookie, 20 if quick else 60
            )
            tables["time to first part (ms)"] = [
                {
                    "measure": "subscribe → first replayed part",
                    "p50": statistics.median(replay),
                    "p95": statistics.quantiles(replay, n=20)[-1],
                },
                {
                    "measure": "start → first part of a new run",
                    "p50": statistics.median(live),
                    "p95": statistics.quantiles(live, n=20)[-1],
                },
            ]
        finally:
            server.stop()
            site.close()

        seconds = 4.0 if quick else 8.0
        site = site_for(Path(tmp) / "c", int(seconds * 50), 0.02)
        server = Server(site)
        cookie = site.user("bench")
        try:
            rows = []
            for runs in (50, 100) if quick else (50, 100, 150):
                rows.append(await concurrent_runs(server, cookie, runs, seconds))
            tables["concurrent runs at 50 parts/s each (one daphne)"] = rows
        finally:
            server.stop()
            site.close()
    return tables


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="fewer parts and repeats")
    args = parser.parse_args()
    report("ws_stream", asyncio.run(main(args.quick)), target=TARGET, as_json=args.json)
