"""What an MCP tool call costs per connection policy: a connection per call (the default)
vs one held across calls (``MCPServer.connected()``), over stdio and streamable HTTP.

The server is the test suite's (``tests/core/mcp/server.py``, the official SDK); each round
makes ``CALLS`` calls of its ``echo`` tool under every variant, interleaved.

    python benchmarks/mcp_calls.py [--json]
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _table import interleaved, median, median_ratio, parse_args, report

from deuz_django.core.mcp import MCPServer, Stdio, StreamableHTTP

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.live_site import free_port, wait_for_port  # noqa: E402

SERVER = ROOT / "tests" / "core" / "mcp" / "server.py"
CALLS = 5
REPEATS = 5


def timed(server: MCPServer, *, held: bool) -> Callable[[], float]:
    """Seconds per call, for ``CALLS`` calls on fresh or held connections."""

    async def calls() -> float:
        start = time.perf_counter()
        if held:
            async with server.connected():
                for _ in range(CALLS):
                    await server.call("echo", {"text": "hi"})
        else:
            for _ in range(CALLS):
                await server.call("echo", {"text": "hi"})
        return (time.perf_counter() - start) / CALLS

    return lambda: asyncio.run(calls())


def main() -> None:
    args = parse_args(__doc__ or "")
    port = free_port()
    http = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, http, seconds=60)
        stdio = MCPServer("files", Stdio(sys.executable, [str(SERVER), "stdio"]))
        remote = MCPServer("files", StreamableHTTP(f"http://127.0.0.1:{port}/mcp"))
        timings = interleaved(
            {
                "stdio, per call": timed(stdio, held=False),
                "stdio, held": timed(stdio, held=True),
                "http, per call": timed(remote, held=False),
                "http, held": timed(remote, held=True),
            },
            REPEATS,
        )
    finally:
        http.terminate()
        http.wait(10)
    rows = [
        {
            "connection": name,
            "ms/call": median(values) * 1000,
            "vs held": median_ratio(values, timings[name.split(",")[0] + ", held"]),
        }
        for name, values in timings.items()
    ]
    report(
        "mcp_calls",
        {f"{CALLS} echo calls per round, {REPEATS} rounds": rows},
        target="documents the per-call vs held-connection trade-off (no target)",
        as_json=args.json,
    )


if __name__ == "__main__":
    main()
