"""A database connection that broke (the server restarted, the network dropped, the
session was terminated) is thrown away, so the next query of this thread opens a new one
instead of failing on the dead one forever."""

from __future__ import annotations

from django.db import connection


def discard_if_broken() -> None:
    """After a :class:`~django.db.DatabaseError` outside a transaction: close this
    thread's connection if it no longer works (Django reopens it on the next query)."""
    if connection.in_atomic_block or connection.connection is None:
        return
    try:
        usable = connection.is_usable()
    except Exception:
        usable = False
    if not usable:
        connection.close()
