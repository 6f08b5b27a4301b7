"""Adapter overhead per streamed token, against the local replay server.

    .venv/bin/python benchmarks/provider_overhead.py [--tokens 10000] [--runs 5] [--json]

For each provider one stream of ``--tokens`` text deltas, in the provider's wire format,
is read four ways:

    raw      httpx2 + SSE framing + ``json.loads`` per event (what any client pays)
    sdk      the SDK's typed stream (``chat.completions.create`` / ``messages.create``),
             which the adapters skip: they read the same stream as JSON
    adapter  ``OpenAIChatModel`` / ``AnthropicModel`` ``.stream()`` events
    loop     ``stream_chat(...).full_stream`` (adapter + the agentic loop)

Reported: the median over ``--runs`` of text parts per second, and microseconds per token
above ``raw``. ``--json`` prints the same figures as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anthropic
import httpx2
import openai

from deuz_django.core import Message, ModelRequest, stream_chat
from deuz_django.core.providers import AnthropicModel, OpenAIChatModel
from tests.core.providers.sse_server import (
    SSEServer,
    anthropic_events,
    openai_events,
    sse,
)

BLOCK = 64 * 1024  # the server writes big blocks, so it is never the bottleneck
KEY = "bench-key"
Reader = Callable[[], Awaitable[int]]


def openai_stream(tokens: int) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1764691200,
            "model": "gpt-4.1-mini-2025-04-14",
            "system_fingerprint": "fp_4c2851f862",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            ],
            "usage": None,
        }

    usage = {
        "prompt_tokens": 10,
        "completion_tokens": tokens,
        "total_tokens": 10 + tokens,
    }
    return openai_events(
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": " tok"}) for _ in range(tokens)),
        chunk({}, "stop"),
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": usage,
        },
    )


def anthropic_stream(tokens: int) -> list[bytes]:
    delta = {"type": "content_block_delta", "index": 0}
    return anthropic_events(
        {
            "type": "message_start",
            "message": {
                "id": "msg_bench",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [],
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        },
        *(
            {**delta, "delta": {"type": "text_delta", "text": " tok"}}
            for _ in range(tokens)
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": tokens},
        },
        {"type": "message_stop"},
    )


def blocks(events: list[bytes]) -> list[bytes]:
    out, current = [], b""
    for event in events:
        current += event
        if len(current) >= BLOCK:
            out.append(current)
            current = b""
    return [*out, current] if current else out


async def raw_reader(http: httpx2.AsyncClient, url: str, body: dict[str, Any]) -> int:
    texts = 0
    async with http.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                event = json.loads(line[6:])
                if "choices" in event:
                    texts += bool(
                        event["choices"] and event["choices"][0]["delta"].get("content")
                    )
                else:
                    texts += event["type"] == "content_block_delta"
    return texts


def readers(
    server: SSEServer, provider: str
) -> tuple[dict[str, Reader], Callable[[], Awaitable[None]]]:
    """Each way to read the stream, and the closer for the clients they share."""
    http = httpx2.AsyncClient(timeout=60)
    request = ModelRequest(messages=(Message("user", "hi"),))
    if provider == "openai":
        client: Any = openai.AsyncOpenAI(
            api_key=KEY, base_url=f"{server.url}/v1", max_retries=0
        )
        model: Any = OpenAIChatModel("gpt-4.1-mini", client=client)
        url, body = (
            f"{server.url}/v1/chat/completions",
            {"model": "gpt-4.1-mini", "stream": True},
        )

        async def sdk() -> int:
            stream = await client.chat.completions.create(
                model="gpt-4.1-mini",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
            )
            return sum(
                [1 async for c in stream if c.choices and c.choices[0].delta.content]
            )
    else:
        client = anthropic.AsyncAnthropic(
            api_key=KEY, base_url=server.url, max_retries=0
        )
        model = AnthropicModel("claude-sonnet-4-5", client=client)
        url, body = (
            f"{server.url}/v1/messages",
            {"model": "claude-sonnet-4-5", "stream": True},
        )

        async def sdk() -> int:
            stream = await client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=10,
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
            )
            return sum([1 async for e in stream if e.type == "content_block_delta"])

    async def adapter() -> int:
        return sum([1 async for e in model.stream(request) if e.type == "text-delta"])

    async def loop() -> int:
        parts = stream_chat(model=model, prompt="hi").full_stream
        return sum([1 async for p in parts if p.type == "text-delta"])

    async def close() -> None:
        await http.aclose()
        await client.close()

    async def raw() -> int:
        return await raw_reader(http, url, body)

    return {"raw": raw, "sdk": sdk, "adapter": adapter, "loop": loop}, close


async def measure(tokens: int, runs: int) -> dict[str, dict[str, dict[str, float]]]:
    results: dict[str, dict[str, dict[str, float]]] = {}
    with SSEServer() as server:
        for provider, make in (
            ("openai", openai_stream),
            ("anthropic", anthropic_stream),
        ):
            payload = blocks(make(tokens))
            ways, close = readers(server, provider)
            seconds: dict[str, list[float]] = {name: [] for name in ways}
            for run in range(runs + 1):  # the first round warms connections and caches
                for name, read in ways.items():
                    server.push(sse(payload))
                    started = time.perf_counter()
                    count = await read()
                    elapsed = time.perf_counter() - started
                    assert count == tokens, (provider, name, count)
                    if run:
                        seconds[name].append(elapsed)
            await close()
            raw = statistics.median(seconds["raw"])
            results[provider] = {
                name: {
                    "parts_per_s": round(tokens / statistics.median(times)),
                    "us_per_token": round(statistics.median(times) / tokens * 1e6, 2),
                    "overhead_us_per_token": round(
                        (statistics.median(times) - raw) / tokens * 1e6, 2
                    ),
                }
                for name, times in seconds.items()
            }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args()
    results = asyncio.run(measure(args.tokens, args.runs))
    if args.json:
        print(
            json.dumps({"tokens": args.tokens, "runs": args.runs, "results": results})
        )
        return
    print(f"{args.tokens} streamed tokens, median of {args.runs} runs")
    print(
        f"{'provider':<10} {'path':<8} {'parts/s':>10} {'µs/token':>9} {'+µs vs raw':>11}"
    )
    for provider, ways in results.items():
        for name, figures in ways.items():
            print(
                f"{provider:<10} {name:<8} {figures['parts_per_s']:>10,.0f} "
                f"{figures['us_per_token']:>9.2f} {figures['overhead_us_per_token']:>11.2f}"
            )


if __name__ == "__main__":
    main()
