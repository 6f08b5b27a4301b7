"""The app's transactions on PostgreSQL: bounded by the lease, so one a frozen process
left open is ended by the server; a caller's own transaction is left as it is."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.db import DatabaseError, connection, connections, transaction
from django.test import override_settings

from deuz_django.models import Run
from deuz_django.storage.db import bounded_atomic

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="PostgreSQL's idle_in_transaction_session_timeout",
    ),
]


def _setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return str(cursor.fetchone()[0])


@override_settings(DEUZ={**settings.DEUZ, "LEASE_SECONDS": 0.5})
def test_a_transaction_of_the_app_left_idle_for_a_lease_is_ended_by_the_server() -> (
    None
):
    """As a process frozen mid-transaction leaves it: the row it locked is free again
    once the transaction sat idle for a lease length, and the process learns on waking
    that its transaction is gone."""
    run = Run.objects.create(run_id="run-idle", agent="scripted")

    def frozen_mid_transaction() -> None:
        with bounded_atomic():
            Run.objects.filter(pk=run.pk).update(title="frozen")
            time.sleep(1.5)  # idle in transaction past the lease
            Run.objects.filter(pk=run.pk).update(title="woken")

    other = connections.create_connection("default")
    try:
        with pytest.raises(DatabaseError, match="idle-in-transaction timeout"):
            frozen_mid_transaction()
        with other.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # a guard, not a timing
            cursor.execute(
                f"SELECT title FROM {Run._meta.db_table} WHERE id = %s FOR UPDATE",
                [run.pk],
            )
            assert cursor.fetchone() == ("",)  # rolled back, and unlocked
    finally:
        other.close()
        connection.close()


@override_settings(DEUZ={**settings.DEUZ, "LEASE_SECONDS": 30})
def test_a_transaction_the_caller_opened_keeps_its_own_limits() -> None:
    with transaction.atomic(), bounded_atomic(wait_for_locks=False):
        assert _setting("idle_in_transaction_session_timeout") == "0"
        assert _setting("lock_timeout") == "0"
    with bounded_atomic(wait_for_locks=False):
        assert _setting("idle_in_transaction_session_timeout") == "30s"
        assert _setting("lock_timeout") == "200ms"
    assert _setting("idle_in_transaction_session_timeout") == "0"  # SET LOCAL
