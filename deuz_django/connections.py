"""A database connection that broke (the server restarted, the network dropped, the
session was terminated) is thrown away, so the next query of this thread opens a new one
instead of failing on the dead one forever."""

from __future__ import annotations

from django.db import DatabaseError, connection


def discard_if_broken() -> None:
    """After a :class:`~django.db.DatabaseError` outside a transaction: close this
    thread's connection if it no longer answers (Django reopens it on the next query).

    The probe is a query rather than the backend's ``is_usable()``, which SQLite's
    backend answers ``True`` without asking."""
    if connection.in_atomic_block or connection.connection is None:
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        connection.close()
