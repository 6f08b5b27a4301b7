"""The app's database connections and transactions, made to survive what goes wrong in
production: a connection that broke (the server restarted, the network dropped, the
session was terminated) is thrown away, so the next query of this thread opens a new one
instead of failing on the dead one forever; and a transaction of the app never holds its
rows for longer than a lease, nor waits where it must not.

A process can freeze mid-transaction — a GC pause, a stopped VM, a stuck network. On
PostgreSQL its transaction then sits ``idle in transaction`` with its row locks held, and
every transaction of the app bounds that: :func:`bounded_atomic` has the server end one
left idle for a lease length (by then its leg's lease has lapsed anyway), so the rows go
back to recovery. Taking a lease skips a locked run (``SKIP LOCKED``), and what must
never wait — a claim, a sweep — waits at most ``LOCK_WAIT_MS`` for a row, then reads it
as busy (:func:`locked`).

SQLite locks the database file, not rows: a writer waits for another at most the
connection's busy timeout (``OPTIONS["timeout"]``), then fails as :func:`locked`; a
process frozen inside a write transaction holds every writer up until it wakes or dies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import DatabaseError, connection, transaction

from ..conf import deuz_settings

# Live transactions of the app hold a row for milliseconds; one held this long is a
# stalled process's.
LOCK_WAIT_MS = 200
_LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL: lock_timeout, NOWAIT


def discard_if_broken() -> bool:
    """After a :class:`~django.db.DatabaseError` outside a transaction: close this
    thread's connection if it no longer answers (Django reopens it on the next query);
    whether it did.

    The probe is a query rather than the backend's ``is_usable()``, which SQLite's
    backend answers ``True`` without asking."""
    if connection.in_atomic_block or connection.connection is None:
        return False
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        connection.close()
        return True
    return False


def once_more_if_broken[T](work: Callable[[], T]) -> T:
    """Do ``work`` (a write that is safe to repeat); if it fails because this thread's
    connection broke, do it once more on a new connection. Any other failure, or a
    second one, is raised."""
    try:
        return work()
    except DatabaseError:
        if not discard_if_broken():
            raise
    return work()


@contextmanager
def bounded_atomic(*, wait_for_locks: bool = True) -> Iterator[None]:
    """``transaction.atomic()`` for a transaction of the app. On PostgreSQL the server
    ends it (and its session) once it sits idle for a lease length, and with
    ``wait_for_locks=False`` a statement in it waits at most ``LOCK_WAIT_MS`` for a lock
    another transaction holds, then fails (:func:`locked`).

    Inside a transaction the caller opened it is a savepoint, and bounds nothing: that
    transaction and its limits are the caller's."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            _bound(wait_for_locks)
        yield


def _bound(wait_for_locks: bool) -> None:
    """``SET LOCAL`` the limits of this transaction, in one round trip."""
    limits = [
        ("idle_in_transaction_session_timeout", f"{_lease_ms()}ms"),
        *([] if wait_for_locks else [("lock_timeout", f"{LOCK_WAIT_MS}ms")]),
    ]
    calls = ", ".join("set_config(%s, %s, true)" for _ in limits)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {calls}", [value for pair in limits for value in pair])


def _lease_ms() -> int:
    return max(1, round(float(deuz_settings.LEASE_SECONDS) * 1000))


def locked(error: DatabaseError) -> bool:
    """Whether ``error`` says a lock was not granted in time: PostgreSQL's
    ``lock_timeout`` or ``NOWAIT``, or SQLite's "database is locked" (another connection
    kept its write transaction open past the busy timeout)."""
    if connection.vendor == "sqlite":
        return "locked" in str(error)
    return getattr(error.__cause__, "sqlstate", None) == _LOCK_NOT_AVAILABLE
