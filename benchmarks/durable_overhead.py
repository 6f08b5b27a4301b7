"""What durability costs: checkpointing a 200-step run, and signing approvals.

A 200-step run (instant model, no-op async tool) without a session, with the in-memory
store, and with an in-memory store that keeps the codec's text (``serialize_checkpoint``
at every save — what any persistent store pays before its own I/O). Each save is timed at
steps 10, 50 and 200. Then the approval signer's sign + verify against the bare
``hmac.new(...).digest()`` + ``hmac.compare_digest`` over the same bytes.

    python benchmarks/durable_overhead.py [--json]
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Callable

from _table import interleaved, median, median_ratio, parse_args, report
from loop_overhead import InstantModel, noop

from deuz_django.core import ToolApprovalRequest, generate_text
from deuz_django.core.durable import (
    AgentCheckpoint,
    DurableSession,
    create_approval_signer,
    create_in_memory_session_store,
    serialize_checkpoint,
)

STEPS = 200
RUN_REPEATS = 15
SAVE_AT = (10, 50, 200)
SIGN_OPS = 2000
SIGN_REPEATS = 9
SECRET = "benchmark-secret"


class TimedStore:
    """The in-memory store, timing each ``save`` by step index; optionally via the codec."""

    def __init__(self, *, codec: bool) -> None:
        self.inner = create_in_memory_session_store()
        self.codec = codec
        self.texts: dict[str, str] = {}
        self.save_seconds: dict[int, float] = {}

    def save(self, checkpoint: AgentCheckpoint) -> None:
        start = time.perf_counter()
        if self.codec:
            self.texts[checkpoint.run_id] = serialize_checkpoint(checkpoint)
        else:
            self.inner.save(checkpoint)
        self.save_seconds[checkpoint.step_index] = time.perf_counter() - start

    def load(self, run_id: str) -> AgentCheckpoint | None:
        return self.inner.load(run_id)


def _run(
    store: TimedStore | None, saves: list[dict[int, float]]
) -> Callable[[], float]:
    async def once() -> float:
        session = DurableSession(store, "bench-run") if store is not None else None
        start = time.perf_counter()
        result = await generate_text(
            model=InstantModel(STEPS),
            prompt="go",
            tools=[noop],
            max_steps=STEPS,
            session=session,
        )
        elapsed = time.perf_counter() - start
        assert len(result.steps) == STEPS
        return elapsed

    def measure() -> float:
        if store is None:
            return asyncio.run(once())
        store.save_seconds = {}
        store.inner = create_in_memory_session_store()
        elapsed = asyncio.run(once())
        saves.append(store.save_seconds)
        return elapsed

    return measure


def _runs() -> list[dict[str, object]]:
    stores = {
        "in-memory store": TimedStore(codec=False),
        "in-memory + codec text": TimedStore(codec=True),
    }
    saves: dict[str, list[dict[int, float]]] = {name: [] for name in stores}
    variants = {"not durable": _run(None, [])}
    variants |= {name: _run(store, saves[name]) for name, store in stores.items()}
    t = interleaved(variants, RUN_REPEATS)
    rows: list[dict[str, object]] = []
    for name, timings in t.items():
        row: dict[str, object] = {
            "variant": name,
            "ms/run": median(timings) * 1e3,
            "µs/step": median(timings) / STEPS * 1e6,
            "× not durable": median_ratio(timings, t["not durable"]),
        }
        for step in SAVE_AT:
            row[f"save µs @{step}"] = (
                median([s[step] for s in saves[name]]) * 1e6 if name in saves else None
            )
        rows.append(row)
    return rows


def _signer() -> list[dict[str, object]]:
    signer = create_approval_signer(secret=SECRET)
    request = ToolApprovalRequest(
        approval_id="toolu_01ABC",
        tool_call_id="toolu_01ABC",
        tool_name="transfer_funds",
        input={"amount": 125.5, "currency": "EUR", "to": "DE89 3704 0044 0532 0130 00"},
    )
    token = signer.sign(request, "run-42")
    signed = token.rpartition(".")[0].encode()  # the bytes the MAC covers: "v1.<body>"
    key = SECRET.encode()

    def deuz() -> float:
        start = time.perf_counter()
        for _ in range(SIGN_OPS):
            assert signer.verify(signer.sign(request, "run-42")) is not None
        return time.perf_counter() - start

    def raw() -> float:
        start = time.perf_counter()
        for _ in range(SIGN_OPS):
            mac = hmac.new(key, signed, "sha256").digest()
            assert hmac.compare_digest(mac, hmac.new(key, signed, "sha256").digest())
        return time.perf_counter() - start

    t = interleaved(
        {"signer sign + verify": deuz, "raw hmac + compare": raw}, SIGN_REPEATS
    )
    return [
        {
            "variant": name,
            "ops/s": SIGN_OPS / median(timings),
            "µs/op": median(timings) / SIGN_OPS * 1e6,
            "× raw hmac": median_ratio(timings, t["raw hmac + compare"]),
        }
        for name, timings in t.items()
    ]


def main() -> None:
    args = parse_args(__doc__ or "")
    report(
        "durable_overhead",
        {
            f"A {STEPS}-step run, durable vs not (instant model, no-op async tool)": (
                _runs()
            ),
            "Approval signer vs raw HMAC-SHA256 (same payload bytes)": _signer(),
        },
        target=(
            "save cost at step 200 within 1.5× of step 10 (DESIGN §6); the codec's "
            "full-history text cannot meet it and is shown to say so"
        ),
        as_json=args.json,
    )


if __name__ == "__main__":
    main()
