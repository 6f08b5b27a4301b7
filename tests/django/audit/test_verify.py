"""``deuz audit verify`` finds the record an intruder changed, deleted or moved — in the
table, behind the model — names it and exits 1; ``deuz audit export`` writes a period
that verifies on its own, and a changed export does not."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from deuz_django import audit
from deuz_django.models import AuditRecord

from .support import deuz_audit, tamper

pytestmark = pytest.mark.django_db


@pytest.fixture
def five() -> list[AuditRecord]:
    """A chain of five records on one run."""
    return [
        audit.append("decision", run_id="r1", details={"n": n, "status": "approved"})
        for n in range(1, 6)
    ]


def test_an_intact_chain_verifies_with_exit_0(five: list[AuditRecord]) -> None:
    assert deuz_audit("verify") == (0, "5 records, chain intact\n")
    assert deuz_audit("verify", "--tenant", "") == (0, "5 records, chain intact\n")


def test_no_records_is_an_intact_chain() -> None:
    assert deuz_audit("verify") == (0, "0 records, chain intact\n")


@pytest.mark.parametrize(
    ("column", "value"),
    [("details", '{"n": 3, "status": "denied"}'), ("actor_name", "mallory")],
)
def test_a_changed_field_is_named_with_its_record(
    five: list[AuditRecord], column: str, value: str
) -> None:
    tamper(f"UPDATE {{table}} SET {column} = %s WHERE sequence = 3", value)

    code, output = deuz_audit("verify")

    assert code == 1
    assert "chain broken at record 3: its fields do not match its digest (changed)" in (
        output
    )


def test_a_changed_field_given_a_new_digest_breaks_the_next_record(
    five: list[AuditRecord],
) -> None:
    tamper("UPDATE {table} SET digest = %s WHERE sequence = 3", "f" * 64)

    code, output = deuz_audit("verify")

    assert code == 1
    assert "chain broken at record 3: its fields do not match" in output
    assert "record 4: its previous digest is not the digest of the record before" in (
        output
    )


def test_a_deleted_record_is_named(five: list[AuditRecord]) -> None:
    tamper("DELETE FROM {table} WHERE sequence = 2")

    code, output = deuz_audit("verify")

    assert code == 1
    assert "4 records, chain broken at record 3: record 2 is missing (deleted)" in (
        output
    )


def test_the_deleted_last_record_is_named_by_the_chain_head(
    five: list[AuditRecord],
) -> None:
    tamper("DELETE FROM {table} WHERE sequence = 5")

    code, output = deuz_audit("verify")

    assert code == 1
    assert "record 5: record 5 is missing at the chain's end (deleted)" in output


def test_two_swapped_records_are_named_as_reordered(five: list[AuditRecord]) -> None:
    tamper("UPDATE {table} SET sequence = 1000 WHERE sequence = 2")
    tamper("UPDATE {table} SET sequence = 2 WHERE sequence = 4")
    tamper("UPDATE {table} SET sequence = 4 WHERE sequence = 1000")

    code, output = deuz_audit("verify")

    assert code == 1
    assert (
        "chain broken at record 2: its previous digest is not the digest of the "
        in (output)
    )
    assert "(records reordered or inserted" in output
    assert "broken: record 4: its previous digest" in output


def test_only_the_tampered_tenant_is_broken(five: list[AuditRecord]) -> None:
    audit.append("stop", tenant="acme")
    tamper("UPDATE {table} SET action = 'fork' WHERE tenant = 'acme'")

    assert deuz_audit("verify", "--tenant", "")[0] == 0
    code, output = deuz_audit("verify", "--tenant", "acme")
    assert code == 1
    assert "tenant 'acme', record 1: its fields do not match its digest" in output


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_export_holds_the_period_with_its_digests_and_verifies_alone(
    five: list[AuditRecord], tmp_path: Path, fmt: str
) -> None:
    tamper(
        "UPDATE {table} SET created_at = %s WHERE sequence <= 2",
        timezone.now() - timedelta(days=1),
    )
    # The first two moved to yesterday (their digests broke): the period is today.
    today = timezone.now().date().isoformat()
    target = tmp_path / f"audit.{fmt}"

    code, output = deuz_audit(
        "export",
        "--since",
        today,
        "--until",
        today,
        "--format",
        fmt,
        "--output",
        str(target),
    )

    assert (code, output) == (0, f"3 records written to {target}\n")
    assert deuz_audit("verify", "--file", str(target)) == (
        0,
        "3 records, chain intact\n",
    )


def test_an_export_goes_to_standard_output_as_json_lines(
    five: list[AuditRecord],
) -> None:
    code, output = deuz_audit("export")

    rows = [json.loads(line) for line in output.splitlines()]
    assert code == 0
    assert [r["sequence"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[1]["previousDigest"] == rows[0]["digest"] == five[0].digest
    assert set(rows[0]) == {
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
    }


def test_a_changed_export_fails_to_verify(
    five: list[AuditRecord], tmp_path: Path
) -> None:
    target = tmp_path / "audit.jsonl"
    deuz_audit("export", "--output", str(target))
    lines = target.read_text().splitlines()
    row = json.loads(lines[3])
    row["details"]["status"] = "denied"
    lines[3] = json.dumps(row)
    del lines[1]
    target.write_text("\n".join(lines) + "\n")

    code, output = deuz_audit("verify", "--file", str(target))

    assert code == 1
    assert "chain broken at record 3: record 2 is missing (deleted)" in output
    assert "record 4: its fields do not match its digest (changed)" in output


def test_an_unreadable_export_is_a_clear_error(tmp_path: Path) -> None:
    target = tmp_path / "audit.jsonl"
    target.write_text('{"sequence": 1}\nnot json\n')

    code, output = deuz_audit("verify", "--file", str(target))

    assert code == 2
    assert "cannot be read as an audit export" in output


def test_a_period_that_ends_before_it_starts_is_refused() -> None:
    code, output = deuz_audit(
        "export", "--since", "2026-12-02", "--until", "2026-12-01T00:00"
    )
    assert (code, output) == (2, "--since must come before --until.")


def test_a_bad_date_is_refused() -> None:
    code, output = deuz_audit("export", "--since", "yesterday")
    assert code == 2
    assert "'yesterday' is not a date (2026-12-01)" in output
