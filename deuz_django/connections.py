"""A database connection that broke (the server restarted, the network dropped, the
session was terminated) is thrown away, so the next query of this thread opens a new one
instead of failing on the dead one forever."""

from __future__ import annotations

from collections.abc import Callable

from django.db import DatabaseError, connection


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
