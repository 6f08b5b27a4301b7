"""The two writes a leg makes most, each one round trip on PostgreSQL.

A checkpoint save that appends to the history this store remembers, and a step's turn
for the step journal, are the hot path of a durable run: one of each per step. Through
the ORM they cost four and six round trips (``BEGIN``, the conditional statements,
savepoints, ``COMMIT``). Here each is a single parameterised statement on PostgreSQL,
its conditions — the history length, step and status the store remembers, the lease's
owner and generation — in its ``WHERE``, so a write that is no longer ours changes
nothing and the caller falls back to the ORM's general path, which decides what
happened:

    WITH run AS (UPDATE run SET … WHERE id = … AND message_count = … AND <lease held>
                 RETURNING id),
         added AS (INSERT INTO message … SELECT run.id, m.* FROM run, unnest(…) AS m)
    SELECT count(*) FROM run

A CTE that modifies data is PostgreSQL's alone; on SQLite the same conditional
statements run in one ``BEGIN IMMEDIATE`` … ``COMMIT`` (calls into the library
in-process, no network round trips), without ``atomic()`` or Django's cursor wrapper,
which cost more than the statements. The turn's ``INSERT … ON CONFLICT … RETURNING``
needs SQLite 3.35.

On PostgreSQL both statements are bound on the server and prepared on their first use
when the connection allows prepared statements: parsing and planning the CTE is about a
quarter of the save's time. Django turns prepared statements off by default
(``OPTIONS["prepare_threshold"]`` is ``None``) so that a transaction-pooling PgBouncer
keeps working; a deployment without one sets it to an integer (docs/production.md).
The ORM's own statements bind their parameters on the client and are never prepared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from ..models import Run, RunCall, RunMessage, RunStep

if TYPE_CHECKING:
    from django.db.models import Field

    from .leases import Lease

MessageRow = tuple[int, str, str, str]  # index, role, data, digest

_RUN, _MESSAGE, _STEP, _CALL = (
    f'"{model._meta.db_table}"' for model in (Run, RunMessage, RunStep, RunCall)
)


def append(
    pk: int,
    values: Mapping[str, Any],
    *,
    message_count: int,
    step_index: int,
    status: str,
    lease: Lease | None,
    fenced_by_root: bool,
    rows: Sequence[MessageRow],
) -> bool:
    """Write the run row's ``values`` and insert ``rows``, only while the row holds
    ``message_count`` messages at ``step_index`` with ``status`` and ``lease`` is still
    held (on the row itself, or on the root run's row, locked, when
    ``fenced_by_root``); ``False``, with nothing written, otherwise.

    A status that stays ``status`` is not set again: SQLite rewrites the index entries
    of each indexed column an ``UPDATE`` sets, even to the value it holds — for the
    status, in two indexes, two more pages to commit."""
    db = _database()
    fence, fence_params = _fence(db, lease, fenced_by_root)
    statement = _append_statement(
        db.vendor, tuple(values), fence, keeps_status=values.get("status") == status
    )
    params = [adapt(values[column], db) for column, adapt in statement.adapters]
    params += [pk, message_count, step_index, status, *fence_params]
    if db.vendor == "postgresql":
        arrays = [list(column) for column in zip(*rows, strict=True)] or [[]] * 4
        with _prepared_cursor(db) as cursor:
            cursor.execute(statement.sql, [*params, *arrays])
            return bool(cursor.fetchone()[0])
    with _sqlite_transaction(db) as cursor:
        cursor.execute(statement.sql, params)
        if cursor.rowcount != 1:
            return False
        cursor.executemany(_SQLITE_INSERT, [(pk, *row) for row in rows])
    return True


@dataclass(frozen=True, slots=True)
class _AppendStatement:
    """An append's SQL for one set of run columns and one lease fence, and the columns
    it sets with each one's adapter (the field's ``get_db_prep_save``): built once, not
    per save."""

    adapters: tuple[tuple[str, Callable[[Any, BaseDatabaseWrapper], Any]], ...]
    sql: str


_INSERT = f'INSERT INTO {_MESSAGE} (run_id, "index", role, data, digest)'
_SQLITE_INSERT = f"{_INSERT} VALUES (%s, %s, %s, %s, %s)"


@cache
def _append_statement(
    vendor: str, columns: tuple[str, ...], fence: str, *, keeps_status: bool
) -> _AppendStatement:
    """The run row's conditional ``UPDATE`` of ``columns`` (the status left out when
    it ``keeps_status``) — on PostgreSQL in the CTE that also inserts the messages, on
    SQLite alone (the ``INSERT`` follows it)."""
    fields = [
        # The run's own columns: never the reverse side of a relation.
        cast("Field[Any, Any]", Run._meta.get_field(name))
        for name in columns
        if not (keeps_status and name == "status")
    ]
    assignments = ", ".join(f'"{f.column}" = %s' for f in fields)
    sql = (
        f"UPDATE {_RUN} SET {assignments} "
        "WHERE id = %s AND message_count = %s AND step_index = %s AND status = %s"
        f"{fence}"
    )
    if vendor == "postgresql":
        sql = (
            f"WITH run AS ({sql} RETURNING id), "
            f"added AS ({_INSERT} SELECT run.id, m.* FROM run, "
            # Arrays sent in binary (%b): as text each ~1 KB message would be escaped
            # in Python, ~60 µs a save against ~15 µs.
            "unnest(%b::integer[], %b::text[], %b::text[], %b::text[]) AS m) "
            "SELECT count(*) FROM run"
        )
    return _AppendStatement(tuple((f.name, f.get_db_prep_save) for f in fields), sql)


def record_turn(
    run_pk: int, step_index: int, basis: int, message: str, lease: Lease | None
) -> int | None:
    """Record a step's turn (codec JSON ``message``), replacing the step's earlier turn
    and its calls, while ``lease`` is held; the step's pk, or ``None`` when the lease
    was taken over."""
    db = _database()
    held, held_params = ("true", []) if lease is None else _held(db, lease, lock=False)
    upsert = (
        f"INSERT INTO {_STEP} (run_id, step_index, basis, message) "
        f"SELECT %s, %s, %s, %s WHERE {held} "
        "ON CONFLICT (run_id, step_index) "
        "DO UPDATE SET basis = excluded.basis, message = excluded.message "
        "RETURNING id"
    )
    params = [run_pk, step_index, basis, message, *held_params]
    if db.vendor == "postgresql":
        sql = (
            f"WITH step AS ({upsert}), "
            f"replaced AS (DELETE FROM {_CALL} WHERE step_id IN (SELECT id FROM step)) "
            "SELECT id FROM step"
        )
        with _prepared_cursor(db) as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchone()
        return None if found is None else int(found[0])
    with _sqlite_transaction(db) as cursor:
        cursor.execute(upsert, params)
        found = cursor.fetchone()
        if found is None:
            return None
        cursor.execute(f"DELETE FROM {_CALL} WHERE step_id = %s", [found[0]])
    return int(found[0])


def record_start(
    step_pk: int, tool_call_id: str, tool_name: str, lease: Lease | None
) -> bool:
    """Record that a call is about to execute, while ``lease`` is held: one statement
    (``bulk_create`` would wrap its ``INSERT`` in a transaction). A start recorded
    already is kept (an idempotent call in doubt runs again under it). ``False`` when
    the lease was taken over: the call must not run."""
    db = _database()
    held, held_params = ("true", []) if lease is None else _held(db, lease, lock=False)
    started_at = db.ops.adapt_datetimefield_value(timezone.now())
    with db.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_CALL} "
            "(step_id, tool_call_id, tool_name, started_at, finished, result, is_error) "
            f"SELECT %s, %s, %s, %s, false, '', false WHERE {held} "
            "ON CONFLICT (step_id, tool_call_id) DO NOTHING",
            [step_pk, tool_call_id, tool_name, started_at, *held_params],
        )
        if cursor.rowcount == 1 or lease is None:
            return True
        cursor.execute(f"SELECT {held}", held_params)  # a start kept, or not ours?
        return bool(cursor.fetchone()[0])


def _database() -> BaseDatabaseWrapper:
    """The default database's connection, looked up once per write (each attribute read
    through ``django.db.connection`` is a thread-local lookup)."""
    return connections[DEFAULT_DB_ALIAS]


def _prepared_cursor(db: BaseDatabaseWrapper) -> CursorWrapper:
    """A PostgreSQL cursor that binds parameters on the server and prepares each
    statement on its first execution (unless the connection's ``prepare_threshold`` is
    ``None``), wrapped like Django's own: execute wrappers and query logging see it."""
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_thread_sharing()
    with db.wrap_database_errors:
        cursor = _preparing_cursor_class()(db.connection)
    return db.make_debug_cursor(cursor) if db.queries_logged else db.make_cursor(cursor)


@cache
def _preparing_cursor_class() -> type[Any]:
    """psycopg's server-binding cursor, executing with ``prepare=True`` (built on first
    use: psycopg is only installed with the ``postgres`` extra)."""
    import psycopg

    class PreparingCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
            return super().execute(query, params, prepare=True, **options)

    return PreparingCursor


@contextmanager
def _sqlite_transaction(db: BaseDatabaseWrapper) -> Iterator[Any]:
    """A cursor in a transaction of its own on SQLite: ``BEGIN IMMEDIATE`` …
    ``COMMIT``, or a savepoint inside an enclosing ``atomic()``; anything raised rolls
    it back.

    The statements are a few microseconds of SQLite each; ``atomic()``'s bookkeeping
    and Django's cursor wrapper cost more than they do, so the transaction is spelled
    out and the cursor is SQLite's own — unless something watches the statements
    (execute wrappers, ``DEBUG``'s query log): then it is Django's, as for any query.
    """
    db.ensure_connection()
    db.validate_no_broken_transaction()
    observed = bool(db.execute_wrappers) or db.queries_logged
    nested = db.in_atomic_block
    driver = db.connection
    with (
        db.wrap_database_errors,
        db.cursor() if observed else _QmarkCursor(driver) as cursor,
    ):
        cursor.execute("SAVEPOINT deuz_write" if nested else "BEGIN IMMEDIATE")
        try:
            yield cursor
            cursor.execute("RELEASE deuz_write" if nested else "COMMIT")
        except BaseException:
            if nested:
                driver.execute("ROLLBACK TO deuz_write")
                driver.execute("RELEASE deuz_write")
            elif driver.in_transaction:
                driver.execute("ROLLBACK")
            raise


class _QmarkCursor:
    """SQLite's cursor taking the ``%s`` placeholders the statements are written with."""

    def __init__(self, driver: Any) -> None:
        self._cursor = driver.cursor()

    def __enter__(self) -> _QmarkCursor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._cursor.close()

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._cursor.execute(_qmark(sql), params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._cursor.executemany(_qmark(sql), rows)

    def fetchone(self) -> Any:
        return self._cursor.fetchone()


@cache
def _qmark(sql: str) -> str:
    """``sql`` with SQLite's ``?`` placeholders: converted once per statement (they are
    few), the same string each time for the driver's statement cache."""
    return sql.replace("%s", "?")


def _fence(
    db: BaseDatabaseWrapper, lease: Lease | None, fenced_by_root: bool
) -> tuple[str, list[Any]]:
    """The ``WHERE`` clause's lease condition on the run row being written."""
    if lease is None:
        return "", []
    if fenced_by_root:
        held, params = _held(db, lease, lock=True)
        return f" AND {held}", params
    return " AND lease_owner = %s AND lease_generation = %s", [
        lease.owner,
        lease.generation,
    ]


def _held(
    db: BaseDatabaseWrapper, lease: Lease, *, lock: bool
) -> tuple[str, list[Any]]:
    """``lease`` is still held on its run's row (locked against a takeover until the
    write commits, where the database has row locks)."""
    locking = " FOR UPDATE" if lock and db.features.has_select_for_update else ""
    return (
        f"EXISTS (SELECT 1 FROM {_RUN} WHERE run_id = %s AND lease_owner = %s "
        f"AND lease_generation = %s{locking})"
    ), [lease.run_id, lease.owner, lease.generation]
