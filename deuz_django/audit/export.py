"""The audit records of a period for an auditor, as JSON Lines or CSV.

Each record is written with every field its digest covers, its previous digest and its
digest (the keys of :func:`~deuz_django.audit.chain.linked_fields`, plus ``digest``), so
the slice can be re-verified without the database (:func:`read_rows`, then
:func:`~deuz_django.audit.verify.verify_rows`): a record of the slice that was changed,
left out or moved breaks it. In CSV, ``details`` is its JSON text and ``actorId`` is
empty for no one.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import IO, Any, Protocol

from ..models.audit import AuditRecord
from .chain import canonical_json, linked_fields

FORMATS = ("jsonl", "csv")
COLUMNS = (
    "tenant",
    "sequence",
    "createdAt",
    "action",
    "actorId",
    "actorName",
    "operator",
    "runId",
    "approvalId",
    "details",
    "previousDigest",
    "digest",
)


def records_between(
    since: datetime | None, until: datetime | None, tenant: str | None = None
) -> Iterator[dict[str, Any]]:
    """The records made from ``since`` up to (not including) ``until``, in chain order,
    each in its exported form."""
    records = AuditRecord.objects.in_chain_order()
    if since is not None:
        records = records.filter(created_at__gte=since)
    if until is not None:
        records = records.filter(created_at__lt=until)
    if tenant is not None:
        records = records.filter(tenant=tenant)
    for record in records.iterator():
        yield linked_fields(record) | {"digest": record.digest}


class Writer(Protocol):
    def write(self, text: str, /) -> Any: ...


def write_rows(rows: Iterable[dict[str, Any]], out: Writer, fmt: str) -> int:
    """Write ``rows`` to ``out`` as ``fmt`` (one of :data:`FORMATS`); how many."""
    count = 0
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(row | {"details": canonical_json(row["details"])})
            count += 1
        return count
    for row in rows:
        out.write(canonical_json(row) + "\n")
        count += 1
    return count


def read_rows(text: IO[str], fmt: str) -> Iterator[dict[str, Any]]:
    """The records of an export, as written (raises :class:`ValueError` naming the
    line that cannot be read)."""
    if fmt == "csv":
        for line, row in enumerate(csv.DictReader(text), start=2):
            try:
                yield row | {
                    "sequence": int(row["sequence"]),
                    "details": json.loads(row["details"]),
                }
            except (KeyError, TypeError, ValueError) as error:
                raise ValueError(f"line {line}: {error}") from None
        return
    for line, raw in enumerate(text, start=1):
        if raw.strip():
            try:
                yield dict(json.loads(raw))
            except (TypeError, ValueError) as error:
                raise ValueError(f"line {line}: {error}") from None
