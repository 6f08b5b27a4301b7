"""The journal and the SSE wire v2 against the reference's recorded bodies (vectors/wire.json)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from deuz_django.core import Deps, Tool
from deuz_django.core import journal as journal_module
from deuz_django.core.durable import (
    DurableSession,
    create_approval_signer,
    create_in_memory_session_store,
    resume_stream_from_checkpoint,
)
from deuz_django.core.generate import StreamChatResult, stream_chat
from deuz_django.core.journal import (
    DONE,
    InMemoryJournal,
    JournalUnavailable,
    JournalWriter,
)
from deuz_django.core.sse import (
    Encoder,
    WireVersion,
    caught_up,
    error_frame,
    headers,
    negotiate,
    parse_cursor,
)
from deuz_django.core.testing import ScriptedModel, reply

VECTORS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "vectors" / "wire.json").read_text()
)


class FixedClock:
    def __init__(self, now: int) -> None:
        self._now = now

    def now(self) -> int:
        return self._now

    async def sleep(self, ms: float) -> None:
        return None


async def journal_leg(
    journal: InMemoryJournal,
    stream_id: str,
    leg: StreamChatResult,
    message_id: str = "m1",
) -> None:
    writer = await JournalWriter.open(
        journal, stream_id, message_id=message_id, flush_interval=0
    )
    async for part in leg.full_stream:
        writer.add(part)
    await writer.close()


async def body(
    journal: InMemoryJournal,
    stream_id: str,
    cursor: int = -1,
    version: WireVersion = "v2",
) -> str:
    """The SSE response a reader would send for the journal as it is now."""
    try:
        records = await journal.read(stream_id, -1, 10_000)
    except Exception as error:
        return error_frame(str(error))
    done = caught_up(cursor, records[-1] if records else None)
    if done is not None:
        return done
    encoder = Encoder(version)
    return encoder.encode([r for r in records if r[0] > cursor]) + encoder.end()


def weather_setup() -> tuple[Any, dict[str, Tool], Any, ScriptedModel]:
    async def get_weather(args: Any, ctx: Any) -> dict[str, int]:
        return {"temp": 22}

    tools = {
        "getWeather": Tool(name="getWeather", execute=get_weather, needs_approval=True)
    }
    model = ScriptedModel(
        [
            reply(
                tool_calls=[("toolu_1", "getWeather", {"city": "Paris"})], usage=(10, 5)
            ),
            reply(text="Sunny in Paris.", usage=(20, 6)),
        ]
    )
    signer = create_approval_signer(secret="wire-secret", clock=FixedClock(1000))
    return create_in_memory_session_store(), tools, signer, model


@pytest.fixture
async def two_legs() -> InMemoryJournal:
    """durable_approval_two_legs: a signed approval leg, then its resume, in one journal."""
    store, tools, signer, model = weather_setup()
    journal = InMemoryJournal()
    first = stream_chat(
        model=model,
        messages=[{"role": "user", "content": "weather?"}],
        tools=tools,
        session=DurableSession(store, "run-w"),
        approval_signer=signer,
        deps=Deps(clock=FixedClock(1000)),
    )
    await journal_leg(journal, "run-w", first)
    token = (await first.result()).pending_approvals[0].token  # type: ignore[index]
    second = resume_stream_from_checkpoint(
        store,
        "run-w",
        model=model,
        tools=tools,
        approval_signer=signer,
        approval_responses=[
            {"approvalId": "toolu_1", "approved": True, "token": token}
        ],
        deps=Deps(clock=FixedClock(1000)),
    )
    await journal_leg(journal, "run-w", second)
    return journal


async def test_two_legs_journal_matches_the_reference_records(
    two_legs: InMemoryJournal,
) -> None:
    # SPEC R11.2, R11.3, R11.9: start only on an empty journal, seqs continue across legs
    expected = VECTORS["durable_approval_two_legs"]["journal"]
    records = await two_legs.read("run-w")
    assert [(seq, json.loads(data)) for seq, data in records] == [
        (r["seq"], r["part"]) for r in expected
    ]


async def test_each_leg_replays_byte_for_byte_as_the_reference_sent_it(
    two_legs: InMemoryJournal,
) -> None:
    # SPEC R11.2: "id: <seq>\ndata: <json>\n\n", the leg's sentinel as [DONE]
    vector = VECTORS["durable_approval_two_legs"]
    leg1 = await two_legs.read("run-w", -1, 12)
    assert (
        "".join(
            f"id: {seq}\ndata: {'[DONE]' if data == DONE else data}\n\n"
            for seq, data in leg1
        )
        == vector["leg1_wire"]
    )
    assert await body(two_legs, "run-w", 11) == vector["leg2_wire"]


async def test_replay_after_last_event_id_sails_through_the_leg_boundary(
    two_legs: InMemoryJournal,
) -> None:
    # SPEC R11.10: the intermediate done (seq 11) is skipped, the last one ends the stream
    assert (
        await body(two_legs, "run-w", parse_cursor("3"))
        == VECTORS["durable_approval_two_legs"]["replay_after_lastEventId_3"]
    )


async def test_a_cursor_at_the_final_done_gets_just_the_end_of_stream(
    two_legs: InMemoryJournal,
) -> None:
    # D5 / SPEC R11.10 fast path: no model call, no replay
    assert await body(two_legs, "run-w", 19) == "id: 19\ndata: [DONE]\n\n"
    assert await body(two_legs, "run-w", 25) == "id: 25\ndata: [DONE]\n\n"


async def test_crash_continuation_repeats_the_interrupted_step_start() -> None:
    # SPEC R11.13: the partial step stays in the log, the re-run emits step-start again
    vector = VECTORS["unbreakable_continuation"]
    journal = InMemoryJournal()
    await journal.append(
        "run-c",
        [
            (r["seq"], json.dumps(r["part"], separators=(",", ":")))
            for r in vector["journal_before_resume"]
        ],
    )
    store = create_in_memory_session_store()

    async def search(args: Any, ctx: Any) -> str:
        return "found"

    tools = {"search": Tool(name="search", execute=search)}
    crashed = stream_chat(
        model=ScriptedModel(
            [
                reply(tool_calls=[("toolu_1", "search", {"q": "x"})], usage=(10, 5)),
                reply(text="never", delay=60),
            ]
        ),
        messages=[{"role": "user", "content": "find"}],
        tools=tools,
        max_steps=2,
        session=DurableSession(store, "run-c"),
    )
    async for part in crashed.full_stream:  # stop inside step 1: the process "dies"
        if part.type == "step-start" and part.step_index == 1:  # type: ignore[union-attr]
            break
    continued = resume_stream_from_checkpoint(
        store,
        "run-c",
        model=ScriptedModel([reply(text="Answer after the crash.", usage=(20, 6))]),
        tools=tools,
    )
    await journal_leg(journal, "run-c", continued)
    assert await body(journal, "run-c", 1) == vector["resume_wire"]


async def test_unknown_run_leg_writes_start_error_and_done() -> None:
    # SPEC R11.13 unknown runId on an empty log
    journal = InMemoryJournal()
    leg = resume_stream_from_checkpoint(
        create_in_memory_session_store(), "nope", model=ScriptedModel([])
    )
    await journal_leg(journal, "nope", leg, message_id="deuz-msg")
    assert await body(journal, "nope") == VECTORS["unknown_run_empty_log"]["wire"]


async def test_a_broken_journal_yields_one_redacted_error_frame_without_id() -> None:
    # SPEC R11.10 step 4, R11.5
    class Broken(InMemoryJournal):
        async def read(self, stream_id: str, after: int = -1, limit: int = 1000) -> Any:
            raise RuntimeError("redis down sk-ant-SECRETxyz1234567")

        async def last_seq(self, stream_id: str) -> int | None:
            return None

    assert await body(Broken(), "x") == VECTORS["broken_store"]["wire"]


def test_headers_and_version_negotiation() -> None:
    # SPEC R11.1, R11.6
    assert headers() == {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-deuz-stream": "v2",
    }
    assert negotiate(" V1 ") == "v1"
    assert negotiate(None) == negotiate("v3") == "v2"


@pytest.mark.parametrize(
    ("raw", "cursor"),
    [
        ("3", 3),
        (" 12 ", 12),
        ("", -1),
        ("-1", -1),
        ("abc", -1),
        ("٣", -1),
        (7, 7),
        (None, -1),
    ],
)
def test_cursor_parsing(raw: object, cursor: int) -> None:
    # SPEC R11.10 step 1
    assert parse_cursor(raw) == cursor


async def test_v1_clients_get_no_ids_and_no_v2_only_parts(
    two_legs: InMemoryJournal,
) -> None:
    # SPEC R11.2, R11.6
    text = await body(two_legs, "run-w", 11, version="v1")
    assert "id:" not in text
    assert "tool-state" not in text
    assert text.endswith("data: [DONE]\n\n")


async def test_writer_batches_appends_and_never_reorders() -> None:
    appended: list[list[int]] = []

    class Counting(InMemoryJournal):
        async def append(
            self, stream_id: str, records: Any, *, fence: object = None
        ) -> None:
            appended.append([seq for seq, _ in records])
            await super().append(stream_id, records)

    journal = Counting()
    writer = await JournalWriter.open(journal, "s", message_id="m", flush_interval=0.01)
    for i in range(500):
        writer.add_ui({"type": "text-delta", "text": str(i)})
    await writer.close()
    seqs = [seq for batch in appended for seq in batch]
    assert seqs == list(range(502))
    assert len(appended) <= 3


async def test_a_failing_append_is_retried_so_nothing_is_lost() -> None:
    failures = {"left": 2}

    class Flaky(InMemoryJournal):
        async def append(
            self, stream_id: str, records: Any, *, fence: object = None
        ) -> None:
            if failures["left"]:
                failures["left"] -= 1
                raise OSError("database is locked")
            await super().append(stream_id, records)

    journal = Flaky()
    writer = await JournalWriter.open(
        journal, "s", message_id="m", flush_interval=0.001
    )
    writer.add_ui({"type": "text-delta", "text": "a"})
    await writer.close()
    assert [seq for seq, _ in await journal.read("s")] == [0, 1, 2]


async def test_a_close_whose_end_the_journal_could_not_store_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whoever ends the stream learns that its end is not journaled (and must journal
    it later), instead of a close that returns as if readers will see ``done``."""
    monkeypatch.setattr(journal_module, "RETRY_SECONDS", 0.001)

    class Down(InMemoryJournal):
        async def append(
            self, stream_id: str, records: Any, *, fence: object = None
        ) -> None:
            raise OSError("the database went away")

    writer = JournalWriter(Down(), "s", next_seq=0)
    writer.add_ui({"type": "text-delta", "text": "a"})
    with pytest.raises(JournalUnavailable, match="end was not journaled"):
        await writer.close()


@pytest.mark.parametrize(
    "text",
    ["plain", "é ✓ 🎉", 'quote " \\ back', "\u2028 line", "lone \ud800 surrogate", ""],
)
async def test_text_deltas_are_journaled_exactly_as_the_general_encoder_writes_them(
    text: str,
) -> None:
    from deuz_django.core.journal import encode_part
    from deuz_django.core.parts import TextDeltaPart

    journal = InMemoryJournal()
    writer = JournalWriter(journal, "s", next_seq=0)
    writer.add(TextDeltaPart(text))
    await writer.close()
    assert (await journal.read("s"))[0][1] == encode_part(
        {"type": "text-delta", "text": text}
    )


def test_writers_that_appended_at_different_moments_append_next_on_the_same_tick() -> (
    None
):
    """The flush grid: every writer of a loop appends on the same ticks, so a process's
    streams make one wake-up and one coalesced round trip per tick, not one each."""
    journal = InMemoryJournal()
    early = JournalWriter(journal, "a", next_seq=0, flush_interval=0.05)
    late = JournalWriter(journal, "b", next_seq=0, flush_interval=0.05)
    early._flushed_at, late._flushed_at = 100.013, 100.031
    now = 100.04
    assert now + early._until_next_tick(now) == pytest.approx(100.05)
    assert now + late._until_next_tick(now) == pytest.approx(100.05)
    # One that has not appended for a whole interval appends at once (a first part).
    assert early._until_next_tick(100.07) == 0.0


async def test_many_writers_on_the_grid_journal_every_part_once_in_order() -> None:
    journal = InMemoryJournal()

    async def leg(index: int) -> None:
        writer = await JournalWriter.open(
            journal, f"s{index}", message_id="m", flush_interval=0.002
        )
        for i in range(60):
            writer.add_ui({"type": "text-delta", "text": str(i)})
            if i % (index % 5 + 1) == 0:
                await asyncio.sleep(0.001 * (index % 3))
        await writer.close()

    await asyncio.gather(*(leg(index) for index in range(40)))
    for index in range(40):
        records = await journal.read(f"s{index}")
        assert [seq for seq, _ in records] == list(range(62))
        texts = [json.loads(data).get("text") for _, data in records[1:-1]]
        assert texts == [str(i) for i in range(60)]
        assert records[-1][1] == DONE


async def test_a_leg_that_ends_between_ticks_is_journaled_without_waiting_for_the_grid() -> (
    None
):
    """The grid delays a leg's middle, not its end: ``close`` cuts the writer's wait for
    the next tick short, so the ``done`` sentinel (and the lease's release after it) are
    not held back by it. With a tick an hour away, a close that waited would time out."""
    journal = InMemoryJournal()
    writer = JournalWriter(journal, "s", next_seq=0, flush_interval=3600)
    writer.add_ui({"type": "text-delta", "text": "first"})  # appended at once
    await asyncio.sleep(0)
    writer.add_ui({"type": "text-delta", "text": "second"})  # waits for the tick
    await asyncio.sleep(0)
    async with asyncio.timeout(10):
        assert await writer.close() == 2
    assert [seq for seq, _ in await journal.read("s")] == [0, 1, 2]
