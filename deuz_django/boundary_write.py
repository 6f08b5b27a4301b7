"""The two writes a leg makes most, each one round trip on PostgreSQL.

A checkpoint save that appends to the history this store remembers, and a step's turn
for the step journal, are the hot path of a durable run: one of each per step. Through
the ORM they cost four and six round trips (``BEGIN``, the conditional statements,
savepoints, ``COMMIT``). Here each is a single parameterised statement on PostgreSQL,
its conditions — the history length and step the store remembers, the lease's owner and
generation — in its ``WHERE``, so a write that is no longer ours changes nothing and
the caller falls back to the ORM's general path, which decides what happened:

    WITH run AS (UPDATE run SET … WHERE id = … AND message_count = … AND <lease held>
                 RETURNING id),
         added AS (INSERT INTO message … SELECT run.id, m.* FROM run, unnest(…) AS m)
    SELECT count(*) FROM run

A CTE that modifies data is PostgreSQL's alone; on SQLite the same conditional
statements run in one transaction (calls into the library in-process, no network round
trips). The turn's ``INSERT … ON CONFLICT … RETURNING`` needs SQLite 3.35.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from .models import Run, RunCall, RunMessage, RunStep

if TYPE_CHECKING:
    from .store import Lease

MessageRow = tuple[int, str, str, str]  # index, role, data, digest

_ROWS_PER_INSERT = 100  # 500 parameters: SQLite's limit is 999 before 3.32
_RUN, _MESSAGE, _STEP, _CALL = (
    f'"{model._meta.db_table}"' for model in (Run, RunMessage, RunStep, RunCall)
)


def append(
    pk: int,
    values: Mapping[str, Any],
    *,
    message_count: int,
    step_index: int,
    lease: Lease | None,
    fenced_by_root: bool,
    rows: Sequence[MessageRow],
) -> bool:
    """Write the run row's ``values`` and insert ``rows``, only while the row holds
    ``message_count`` messages at ``step_index`` and ``lease`` is still held (on the
    row itself, or on the root run's row, locked, when ``fenced_by_root``); ``False``,
    with nothing written, otherwise."""
    db = _database()
    fields = [Run._meta.get_field(name) for name in values]
    assignments = ", ".join(f'"{f.column}" = %s' for f in fields)
    params: list[Any] = [f.get_db_prep_save(values[f.name], db) for f in fields]
    fence, fence_params = _fence(db, lease, fenced_by_root)
    update = (
        f"UPDATE {_RUN} SET {assignments} "
        f"WHERE id = %s AND message_count = %s AND step_index = %s{fence}"
    )
    params += [pk, message_count, step_index, *fence_params]
    insert = f'INSERT INTO {_MESSAGE} (run_id, "index", role, data, digest)'
    if db.vendor == "postgresql":
        columns = [list(column) for column in zip(*rows, strict=True)] or [[]] * 4
        sql = (
            f"WITH run AS ({update} RETURNING id), "
            f"added AS ({insert} SELECT run.id, m.* FROM run, "
            "unnest(%s::integer[], %s::text[], %s::text[], %s::text[]) AS m) "
            "SELECT count(*) FROM run"
        )
        with db.cursor() as cursor:
            cursor.execute(sql, [*params, *columns])
            return bool(cursor.fetchone()[0])
    with transaction.atomic(), db.cursor() as cursor:
        cursor.execute(update, params)
        if cursor.rowcount != 1:
            return False
        for first in range(0, len(rows), _ROWS_PER_INSERT):
            batch = rows[first : first + _ROWS_PER_INSERT]
            cursor.execute(
                f"{insert} VALUES " + ", ".join(["(%s, %s, %s, %s, %s)"] * len(batch)),
                [value for row in batch for value in (pk, *row)],
            )
    return True


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
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchone()
        return None if found is None else int(found[0])
    with transaction.atomic(), db.cursor() as cursor:
        cursor.execute(upsert, params)
        found = cursor.fetchone()
        if found is None:
            return None
        cursor.execute(f"DELETE FROM {_CALL} WHERE step_id = %s", [found[0]])
    return int(found[0])


def _database() -> BaseDatabaseWrapper:
    """The default database's connection, looked up once per write (each attribute read
    through ``django.db.connection`` is a thread-local lookup)."""
    return connections[DEFAULT_DB_ALIAS]


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
