"""Verifying an audit chain: every record still what it was, none missing, none moved.

Records are read in sequence order, each checked against the one before it as stored:

- a sequence that jumps: the records in between were **deleted**;
- a previous digest that is not the stored digest of the record before: records were
  **reordered or inserted** (or the record before was changed and given a new digest);
- a digest that does not match the record's fields: the record was **changed**.

Against the chain's head as well: records missing after the last one were deleted, and a
last record that is not the one the head ends on was changed or replaced. The same
checks read an export (:func:`verify_rows`), whose first record may follow one the
export left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..models.audit import GENESIS, AuditChainHead, AuditRecord
from .chain import digest_of, linked_fields

CHANGED, DELETED, REORDERED = "changed", "deleted", "reordered"


@dataclass(frozen=True, slots=True)
class Break:
    """Where a chain is broken: the record's tenant and sequence, what kind of break
    (changed, deleted, reordered) and what was found."""

    tenant: str
    sequence: int
    kind: str
    problem: str

    def __str__(self) -> str:
        where = f"tenant {self.tenant!r}, " if self.tenant else ""
        return f"{where}record {self.sequence}: {self.problem}"


@dataclass(slots=True)
class ChainReport:
    """What a verification found: how many records it read and every break."""

    count: int = 0
    breaks: list[Break] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.breaks


def verify_chain(tenant: str | None = None) -> ChainReport:
    """Verify the chain of ``tenant`` in the database (``None``: every tenant's)."""
    report = ChainReport()
    for name in [tenant] if tenant is not None else _tenants():
        records = AuditRecord.objects.filter(tenant=name).order_by("sequence")
        rows = (linked_fields(r) | {"digest": r.digest} for r in records.iterator())
        last = _verify_rows(name, rows, report, previous=(0, GENESIS))
        _check_head(name, last, report)
    return report


def _tenants() -> list[str]:
    """Every tenant with a chain: its head, or records (a head deleted too)."""
    records = AuditRecord.objects.order_by().values_list("tenant", flat=True)
    heads = AuditChainHead.objects.values_list("tenant", flat=True)
    return sorted(set(heads) | set(records.distinct()))


def verify_rows(rows: Iterable[dict[str, Any]]) -> ChainReport:
    """Verify exported records (:mod:`.export`'s JSON form), tenant by tenant in the
    order given; each tenant's first record is taken to follow whatever came before it
    (an export of a period), unless it is the chain's first."""
    report = ChainReport()
    by_tenant: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_tenant.setdefault(str(row.get("tenant", "")), []).append(row)
    for tenant, chain in by_tenant.items():
        _verify_rows(tenant, iter(chain), report, previous=None)
    return report


def _verify_rows(
    tenant: str,
    rows: Iterator[dict[str, Any]],
    report: ChainReport,
    *,
    previous: tuple[int, str] | None,
) -> tuple[int, str]:
    """Check ``rows`` in order, each against ``previous`` (its sequence and stored
    digest; ``None``: take the first row's word for it); the last row's."""
    for row in rows:
        report.count += 1
        sequence = int(row["sequence"])
        if previous is None and sequence != 1:
            previous = (sequence - 1, str(row["previousDigest"]))
        expected, before = previous or (0, GENESIS)
        found = _break(row, sequence, expected + 1, before)
        if found is not None:
            report.breaks.append(Break(tenant, sequence, *found))
        previous = (sequence, str(row["digest"]))
    return previous or (0, GENESIS)


def _break(
    row: dict[str, Any], sequence: int, expected: int, before: str
) -> tuple[str, str] | None:
    """What is wrong with ``row`` where record ``expected`` should be."""
    if sequence > expected:
        missing = (
            f"record {expected} is missing"
            if sequence == expected + 1
            else f"records {expected} to {sequence - 1} are missing"
        )
        return DELETED, f"{missing} (deleted)"
    if sequence < expected:
        return REORDERED, f"its sequence repeats record {sequence} (inserted)"
    if row["previousDigest"] != before:
        return REORDERED, (
            "its previous digest is not the digest of the record before it "
            "(records reordered or inserted, or the one before re-digested)"
        )
    if digest_of(row) != row["digest"]:
        return CHANGED, "its fields do not match its digest (changed)"
    return None


def _check_head(tenant: str, last: tuple[int, str], report: ChainReport) -> None:
    """The chain ends where its head says: nothing deleted or replaced at the end."""
    head = AuditChainHead.objects.filter(tenant=tenant).first()
    if head is None:
        return
    sequence, digest = last
    if head.sequence > sequence:
        first = sequence + 1
        missing = (
            f"record {first} is missing"
            if head.sequence == first
            else f"records {first} to {head.sequence} are missing"
        )
        report.breaks.append(
            Break(tenant, first, DELETED, f"{missing} at the chain's end (deleted)")
        )
    elif head.sequence < sequence:
        report.breaks.append(
            Break(
                tenant,
                head.sequence + 1,
                REORDERED,
                f"the chain ends at record {head.sequence}: what follows was inserted",
            )
        )
    elif head.digest != digest:
        report.breaks.append(
            Break(
                tenant,
                sequence,
                CHANGED,
                "it is not the record the chain ended on (changed or replaced)",
            )
        )
