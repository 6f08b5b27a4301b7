"""The contract every stream journal passes (SPEC §11.2; STYLE rule 3).

The sessions test-mixin pattern: subclass :class:`StreamJournalContract` and provide a
``journal`` fixture (a fresh journal) and a ``stream_id`` fixture naming a stream the
backend may write.
"""

from __future__ import annotations

import asyncio

import pytest

from ...journal import DONE, JournalWriter, StreamJournal


class StreamJournalContract:
    """Behaviour every journal shares. Subclasses provide ``journal`` and ``stream_id``."""

    async def test_an_empty_stream_has_no_last_seq_and_no_records(
        self, journal: StreamJournal, stream_id: str
    ) -> None:
        assert await journal.last_seq(stream_id) is None
        assert await journal.read(stream_id) == []

    async def test_records_come_back_in_order_after_the_cursor(
        self, journal: StreamJournal, stream_id: str
    ) -> None:
        await journal.append(stream_id, [(0, '{"type":"start"}'), (1, '{"a":1}')])
        await journal.append(stream_id, [(2, '{"b":"é"}'), (3, DONE)])
        assert await journal.read(stream_id) == [
            (0, '{"type":"start"}'),
            (1, '{"a":1}'),
            (2, '{"b":"é"}'),
            (3, DONE),
        ]
        assert await journal.read(stream_id, 1) == [(2, '{"b":"é"}'), (3, DONE)]
        assert await journal.read(stream_id, 0, limit=2) == [
            (1, '{"a":1}'),
            (2, '{"b":"é"}'),
        ]
        assert await journal.read(stream_id, 3) == []
        assert await journal.last_seq(stream_id) == 3

    async def test_data_is_kept_byte_for_byte(
        self, journal: StreamJournal, stream_id: str
    ) -> None:
        data = '{"type":"text-delta","text":"a\\u2028b \\"q\\" ✓ 1e-7"}'
        await journal.append(stream_id, [(0, data)])
        assert await journal.read(stream_id) == [(0, data)]

    async def test_an_append_out_of_order_is_refused(
        self, journal: StreamJournal, stream_id: str
    ) -> None:
        await journal.append(stream_id, [(0, "{}")])
        with pytest.raises(Exception):  # noqa: B017, PT011 — each backend raises its own error
            await journal.append(stream_id, [(5, "{}")])
        assert await journal.last_seq(stream_id) == 0

    async def test_delete_empties_the_stream(
        self, journal: StreamJournal, stream_id: str
    ) -> None:
        await journal.append(stream_id, [(0, "{}")])
        await journal.delete(stream_id)
        assert await journal.last_seq(stream_id) is None

    async def test_two_legs_share_one_gapless_numbering(
        self, journal: StreamJournal, stream_id: str
    ) -> None:
        for leg in range(2):
            writer = await JournalWriter.open(
                journal, stream_id, message_id="m", flush_interval=0
            )
            for i in range(3):
                writer.add_ui({"type": "text-delta", "text": f"{leg}.{i}"})
            await writer.close()
        records = await journal.read(stream_id)
        assert [seq for seq, _ in records] == list(range(9))
        assert [data for _, data in records].count(DONE) == 2
        assert records[0][1] == '{"type":"start","messageId":"m"}'

    async def test_a_reader_tailing_while_a_writer_appends_sees_every_record_once(
        self, journal: StreamJournal, stream_id: str
    ) -> None:
        writer = await JournalWriter.open(
            journal, stream_id, message_id="m", flush_interval=0.001
        )
        seen: list[int] = []

        async def tail() -> None:
            cursor = -1
            while not seen or seen[-1] != 201:
                for seq, _ in await journal.read(stream_id, cursor):
                    seen.append(seq)
                    cursor = seq
                await asyncio.sleep(0.001)

        reader = asyncio.ensure_future(tail())
        for i in range(200):
            writer.add_ui({"type": "text-delta", "text": str(i)})
            if i % 20 == 0:
                await asyncio.sleep(0.002)
        await writer.close()
        await asyncio.wait_for(reader, 10)
        assert seen == list(range(202))
