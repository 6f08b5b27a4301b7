"""Stream journal backends: the database (default) and Redis (``channels_redis`` deployments).

Both implement :class:`deuz_django.core.journal.StreamJournal` and pass one contract suite.
``DEUZ["STREAM_JOURNAL"]`` picks the class; :func:`get_journal` returns the process's instance.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection

from ..conf import deuz_settings
from ..core.journal import JournalFenced, Record, StreamJournal
from ..models import Run, StreamJournalEntry
from .db import bounded_atomic, once_more_if_broken
from .leases import Lease

KNOWN_RUNS = 10_000  # runs whose row and next seq the database journal remembers


@dataclass(slots=True)
class _Appends:
    """The appends of one event loop waiting for their round trip, and the task making
    it (``None`` between rounds, so the loop it ran on can be collected)."""

    pending: list[tuple[str, list[Record], object, asyncio.Future[None]]] = field(
        default_factory=list
    )
    flusher: asyncio.Task[None] | None = None


class DatabaseJournal:
    """Records as ``StreamJournalEntry`` rows of the root run.

    Appends from every leg on an event loop are coalesced: while one INSERT is in
    flight, what the other runs append waits and goes into the next, one transaction for
    all. With a hundred runs streaming, that is a few dozen inserts a second, not
    thousands. Each event loop has its own round: a process may run legs on several (a
    worker runs each leg's task on a loop of its own, a sweep without a server's loop
    closes journals on another), and a future is only ever resolved by its own loop.
    """

    def __init__(self) -> None:
        self._run_pks: dict[str, int] = {}
        self._next_seq: dict[str, int] = {}
        self._appends: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, _Appends
        ] = weakref.WeakKeyDictionary()

    def _run_pk(self, stream_id: str) -> int | None:
        pk = self._run_pks.get(stream_id)
        if pk is None:
            pk = Run.objects.named(stream_id).values_list("pk", flat=True).first()
            if pk is not None:
                _remember(self._run_pks, stream_id, pk)
        return pk

    def append_sync(
        self, stream_id: str, records: Sequence[Record], *, fence: object = None
    ) -> None:
        error = self._append_many([(stream_id, list(records), fence)])[0]
        if error is not None:
            raise error

    def _append_many(
        self, batches: list[tuple[str, list[Record], object]]
    ) -> list[Exception | None]:
        """Append several streams' records in one transaction; an out-of-order or fenced
        batch fails alone (its stream's records are left out), the rest are written."""
        # A batch is written whole or not at all, so it may be tried again.
        return once_more_if_broken(lambda: self._append_in_one_transaction(batches))

    def _append_in_one_transaction(
        self, batches: list[tuple[str, list[Record], object]]
    ) -> list[Exception | None]:
        errors: list[Exception | None] = []
        rows: list[tuple[int, int, str]] = []
        with bounded_atomic():
            held = self._held_leases([fence for _, _, fence in batches])
            for stream_id, records, fence in batches:
                error = self._check(stream_id, records, fence, held)
                errors.append(error)
                if error is None and records:
                    pk = self._run_pks[stream_id]
                    rows.extend((pk, seq, data) for seq, data in records)
                    _remember(self._next_seq, stream_id, records[-1][0] + 1)
            if rows:
                try:
                    _insert(rows)
                except Exception:
                    self._next_seq.clear()
                    raise
        return errors

    @staticmethod
    def _held_leases(fences: list[object]) -> set[tuple[str, str, int]]:
        """Which of the batches' leases still hold — one query for the whole round, not
        one per batch (a hundred streaming legs would otherwise double the queries)."""
        run_ids = list({f.run_id for f in fences if isinstance(f, Lease)})
        if not run_ids:
            return set()
        # Raw SQL like the insert: compiling the ORM query was most of this round's cost.
        with connection.cursor() as cursor:
            cursor.execute(
                _HELD_LEASES.format(", ".join(["%s"] * len(run_ids))), run_ids
            )
            return {(run_id, owner, int(gen)) for run_id, owner, gen in cursor}

    def _check(
        self,
        stream_id: str,
        records: list[Record],
        fence: object,
        held: set[tuple[str, str, int]],
    ) -> Exception | None:
        pk = self._run_pk(stream_id)
        if pk is None:
            return LookupError(f"journal: no run {stream_id!r}")
        if not records:
            return None
        if (
            isinstance(fence, Lease)
            and (fence.run_id, fence.owner, fence.generation) not in held
        ):
            return JournalFenced(
                f"journal {stream_id!r}: lease generation {fence.generation} was taken over"
            )
        expected = self._next_seq.get(stream_id)
        if (
            expected != records[0][0]
        ):  # unknown, or another process wrote since: ask the DB
            last = self.last_seq_sync(stream_id)
            expected = 0 if last is None else last + 1
        if records[0][0] != expected:
            return ValueError(
                f"journal {stream_id!r}: append at seq {records[0][0]}, expected {expected}"
            )
        return None

    def read_sync(
        self, stream_id: str, after: int = -1, limit: int = 1000
    ) -> list[Record]:
        pk = self._run_pk(stream_id)
        if pk is None:
            return []
        rows = (
            StreamJournalEntry.objects.filter(run_id=pk, seq__gt=after)
            .order_by("seq")
            .values_list("seq", "part")[:limit]
        )
        return list(rows)

    def last_seq_sync(self, stream_id: str) -> int | None:
        pk = self._run_pk(stream_id)
        if pk is None:
            return None
        last = (
            StreamJournalEntry.objects.filter(run_id=pk)
            .order_by("-seq")
            .values_list("seq", flat=True)
            .first()
        )
        # What a writer opening the journal asked: its first append need not ask again.
        _remember(self._next_seq, stream_id, 0 if last is None else last + 1)
        return last

    def delete_sync(self, stream_id: str) -> None:
        pk = self._run_pk(stream_id)
        if pk is not None:
            StreamJournalEntry.objects.filter(run_id=pk).delete()

    async def append(
        self, stream_id: str, records: Sequence[Record], *, fence: object = None
    ) -> None:
        if not records:
            return
        loop = asyncio.get_running_loop()
        appends = self._appends.get(loop)
        if appends is None:
            appends = self._appends[loop] = _Appends()
        done = loop.create_future()
        appends.pending.append((stream_id, list(records), fence, done))
        if appends.flusher is None or appends.flusher.done():
            appends.flusher = asyncio.ensure_future(self._flush(appends))
        await done

    async def _flush(self, appends: _Appends) -> None:
        try:
            while appends.pending:
                taken, appends.pending = appends.pending, []
                batches = [
                    (stream_id, records, fence)
                    for stream_id, records, fence, _ in taken
                ]
                try:
                    errors = await sync_to_async(self._append_many)(batches)
                except Exception as failure:
                    errors = [failure] * len(taken)
                for (_, _, _, done), error in zip(taken, errors, strict=True):
                    if done.done():
                        continue
                    if error is None:
                        done.set_result(None)
                    else:
                        done.set_exception(error)
        finally:
            appends.flusher = None

    async def read(
        self, stream_id: str, after: int = -1, limit: int = 1000
    ) -> list[Record]:
        return await sync_to_async(self.read_sync)(stream_id, after, limit)

    async def last_seq(self, stream_id: str) -> int | None:
        return await sync_to_async(self.last_seq_sync)(stream_id)

    async def delete(self, stream_id: str) -> None:
        await sync_to_async(self.delete_sync)(stream_id)


class RedisJournal:
    """Records in a Redis list per run: a record's seq is its index, so reads are slices."""

    def __init__(
        self, url: str | None = None, *, prefix: str = "deuz:journal:"
    ) -> None:
        self.url = url or deuz_settings.STREAM_REDIS_URL
        self.prefix = prefix
        self._clients: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def _redis(self) -> Any:
        return self._connection()[0]

    def _connection(self) -> tuple[Any, Any]:
        """A client per event loop: redis-py's asyncio connections belong to one loop."""
        import redis.asyncio as redis

        loop = asyncio.get_running_loop()
        found = self._clients.get(loop)
        if found is None:
            client = redis.from_url(self.url, decode_responses=True)
            found = self._clients[loop] = (
                client,
                client.register_script(_APPEND_SCRIPT),
            )
        return found

    def _key(self, stream_id: str) -> str:
        return self.prefix + stream_id

    async def append(
        self, stream_id: str, records: Sequence[Record], *, fence: object = None
    ) -> None:
        """Not fenced: Redis holds no lease (the database journal checks it)."""
        if not records:
            return
        # Check-and-append in one round trip: the list length must be the first seq.
        script = self._connection()[1]
        ok = await script(
            keys=[self._key(stream_id)],
            args=[records[0][0], *(data for _, data in records)],
        )
        if not ok:
            raise ValueError(
                f"journal {stream_id!r}: append at seq {records[0][0]} out of order"
            )

    async def read(
        self, stream_id: str, after: int = -1, limit: int = 1000
    ) -> list[Record]:
        start = max(0, after + 1)
        items = await self._redis.lrange(self._key(stream_id), start, start + limit - 1)
        return [(start + offset, data) for offset, data in enumerate(items)]

    async def last_seq(self, stream_id: str) -> int | None:
        length = int(await self._redis.llen(self._key(stream_id)))
        return length - 1 if length else None

    async def delete(self, stream_id: str) -> None:
        await self._redis.delete(self._key(stream_id))

    async def aclose(self) -> None:
        """Close this loop's connection."""
        loop = asyncio.get_running_loop()
        found = self._clients.pop(loop, None)
        if found is not None:
            await found[0].aclose()


def _remember(known: dict[str, int], stream_id: str, value: int) -> None:
    """Keep what a long-lived process knows of the runs it streamed bounded: past
    ``KNOWN_RUNS`` it forgets them all (a forgotten run costs one query, once)."""
    if len(known) >= KNOWN_RUNS and stream_id not in known:
        known.clear()
    known[stream_id] = value


_INSERT = f"INSERT INTO {StreamJournalEntry._meta.db_table} (run_id, seq, part) VALUES "
_ROWS_PER_INSERT = 1000  # 3 parameters a row: far below any driver's limit


def _insert(rows: list[tuple[int, int, str]]) -> None:
    """The rows, a multi-row ``INSERT`` per thousand: plain SQL, not ``bulk_create`` (a
    streamed token must not cost a model instance), and not ``executemany``, which
    psycopg runs in pipeline mode — a process frozen mid-pipeline (SIGSTOP, a stopped VM)
    leaves PostgreSQL waiting for the pipeline's end, where its idle-in-transaction
    timeout is not armed, and the locks of the rows it wrote are held for good."""
    with connection.cursor() as cursor:
        for start in range(0, len(rows), _ROWS_PER_INSERT):
            chunk = rows[start : start + _ROWS_PER_INSERT]
            values = ", ".join(["(%s, %s, %s)"] * len(chunk))
            cursor.execute(_INSERT + values, [v for row in chunk for v in row])


_HELD_LEASES = (
    f"SELECT run_id, lease_owner, lease_generation FROM {Run._meta.db_table} "
    "WHERE run_id IN ({})"
)
_APPEND_SCRIPT = """
if redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[1]) then return 0 end
for i = 2, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
return 1
"""


@cache
def get_journal() -> StreamJournal:
    """The configured journal (one instance per process; reset with ``cache_clear``)."""
    journal_class = deuz_settings.STREAM_JOURNAL
    instance: StreamJournal = journal_class()
    return instance
