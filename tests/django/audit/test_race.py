"""Appends made at the same instant, each by a thread with a connection (a database
session) of its own, keep one linear chain: every record's previous digest is the digest
of the record before it, and the sequence has no gap and no repeat. The append locks its
tenant's chain head, a row lock on PostgreSQL (SQLite has one writer anyway)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from deuz_django import audit
from deuz_django.models import AuditRecord
from deuz_django.models.audit import GENESIS
from deuz_django.storage.db import bounded_atomic

pytestmark = pytest.mark.django_db(transaction=True)
THREADS, EACH = 8, 10


def append_together(tenant: str, *, act_first: bool) -> list[BaseException]:
    """``THREADS`` threads released at once, each appending ``EACH`` records (after an
    act of its own in the same transaction, with ``act_first``); what they raised."""
    start = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def appender(number: int) -> None:
        try:
            start.wait(timeout=30)
            for n in range(EACH):
                with bounded_atomic():
                    if act_first:  # the act's own statement, as a verdict's write
                        AuditRecord.objects.filter(tenant="nobody").exists()
                    audit.append(
                        "decision",
                        tenant=tenant,
                        run_id=f"run-{number}",
                        details={"n": n},
                    )
        except BaseException as error:  # reported to the test
            failures.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=appender, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return failures


def assert_one_line(tenant: str, count: int) -> None:
    records = list(AuditRecord.objects.filter(tenant=tenant).order_by("sequence"))
    assert [r.sequence for r in records] == list(range(1, count + 1))
    previous = [GENESIS, *(r.digest for r in records[:-1])]
    assert [r.previous_digest for r in records] == previous  # no fork of the chain
    report = audit.verify_chain(tenant)
    assert (report.count, report.breaks) == (count, [])


@pytest.mark.parametrize("act_first", [False, True])
def test_appends_at_the_same_instant_keep_one_linear_chain(act_first: bool) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("a race of database sessions: PostgreSQL (SQLite has one writer)")
    audit.append("decision", tenant="busy")  # the head exists: they queue on its lock

    assert append_together("busy", act_first=act_first) == []

    assert_one_line("busy", 1 + THREADS * EACH)


def test_the_first_appends_of_a_new_tenant_make_one_chain_head() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("a race of database sessions: PostgreSQL (SQLite has one writer)")

    assert append_together("new", act_first=False) == []

    assert_one_line("new", THREADS * EACH)
