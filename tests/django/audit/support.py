"""Helpers the audit tests share: the chain as (sequence, action) pairs, ``deuz audit``
run as a command, and tampering done the way an intruder would — straight in the table,
past the model that refuses."""

from __future__ import annotations

from io import StringIO
from typing import Any

from django.core.management import CommandError, call_command
from django.db import connection

from deuz_django.models import AuditRecord

TABLE = AuditRecord._meta.db_table


def chain(**filters: Any) -> list[tuple[int, str]]:
    records = AuditRecord.objects.filter(**filters).order_by("tenant", "sequence")
    return list(records.values_list("sequence", "action"))


def actions(**filters: Any) -> list[str]:
    return [action for _, action in chain(**filters)]


def deuz_audit(*args: str) -> tuple[int, str]:
    """Run ``deuz audit ARGS``: its exit code and what it printed (and its error)."""
    out = StringIO()
    try:
        call_command("deuz", "audit", *args, stdout=out)
    except CommandError as error:
        return error.returncode, f"{out.getvalue()}{error}"
    return 0, out.getvalue()


def tamper(sql: str, *params: Any) -> None:
    """Change the audit table behind the model's back (``{table}`` in ``sql``)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.format(table=TABLE), params)
