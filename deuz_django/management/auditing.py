"""``deuz audit``: prove the audit trail intact, and hand a period of it to an auditor.

    deuz audit verify [--tenant T | --file FILE [--format jsonl|csv]]
    deuz audit export [--since DATE] [--until DATE] [--tenant T]
                      [--format jsonl|csv] [--output FILE]

``verify`` reads the chain in the database (every tenant's, or ``--tenant``'s) or an
export (``--file``) record by record; it exits 0 with "N records, chain intact", or 1
naming the first broken record — its sequence and what is wrong (changed, deleted,
reordered or inserted) — after listing every break it found.

``export`` writes the records of a period with their digests and previous digests, one
JSON object a line (or CSV), to ``--output`` or the standard output. ``--since`` is
inclusive, ``--until`` exclusive; a bare date is midnight UTC, and a bare ``--until``
date takes that whole day in.
"""

from __future__ import annotations

from argparse import ArgumentTypeError, _SubParsersAction
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ..audit.export import FORMATS, read_rows, records_between, write_rows
from ..audit.verify import ChainReport, verify_chain, verify_rows
from .output import BAD_ARGUMENTS, RUN_ERROR

SHOWN_BREAKS = 20  # listed before the summary; the count says how many more


def add_audit(actions: _SubParsersAction[Any]) -> None:
    """``audit verify`` and ``audit export``."""
    audit = actions.add_parser(
        "audit", help="Verify the audit trail's hash chain, or export a period of it."
    )
    steps = audit.add_subparsers(dest="audit_action", metavar="STEP", required=True)
    verify = steps.add_parser(
        "verify", help="Check every record against its digest and the one before it."
    )
    where = verify.add_mutually_exclusive_group()
    where.add_argument("--tenant", help="Only this tenant's chain (default: all).")
    where.add_argument("--file", type=Path, help="Verify an export instead.")
    verify.add_argument("--format", choices=FORMATS, help="The file's (by its name).")
    export = steps.add_parser(
        "export", help="Write a period's records with their digests (JSON Lines, CSV)."
    )
    export.add_argument("--since", type=_moment, help="From (inclusive).")
    export.add_argument("--until", type=_until, help="Up to (exclusive).")
    export.add_argument("--tenant", help="Only this tenant's records.")
    export.add_argument("--format", choices=FORMATS, default="jsonl")
    export.add_argument("--output", type=Path, help="A file (default: standard out).")


def _moment(text: str) -> datetime:
    """A date (midnight UTC) or an ISO date-time (UTC unless it says otherwise)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ArgumentTypeError(
            f"{text!r} is not a date (2026-12-01) or date-time (2026-12-01T09:30)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _until(text: str) -> datetime:
    """As :func:`_moment`; a bare date ends after that day."""
    moment = _moment(text)
    try:
        date.fromisoformat(text)
    except ValueError:
        return moment
    return datetime.combine(moment.date() + timedelta(days=1), time(), UTC)


class AuditCommand(BaseCommand):
    """The ``audit`` action of the ``deuz`` command."""

    def handle_audit(self, *, audit_action: str, **options: Any) -> None:
        if audit_action == "verify":
            self._verify(options["tenant"], options["file"], options["format"])
        else:
            self._export(**options)

    def _verify(self, tenant: str | None, file: Path | None, fmt: str | None) -> None:
        if file is None:
            report = verify_chain(tenant)
        else:
            fmt = fmt or ("csv" if file.suffix.lower() == ".csv" else "jsonl")
            try:
                with file.open(newline="") as text:
                    report = verify_rows(read_rows(text, fmt))
            except (OSError, KeyError, ValueError) as error:
                problem = (
                    f"missing field {error}" if isinstance(error, KeyError) else error
                )
                raise CommandError(
                    f"{file} cannot be read as an audit export: {problem}",
                    returncode=BAD_ARGUMENTS,
                ) from None
        self._report(report)

    def _report(self, report: ChainReport) -> None:
        for found in report.breaks[:SHOWN_BREAKS]:
            self.stdout.write(f"broken: {found} [{found.kind}]")
        if report.intact:
            self.stdout.write(f"{report.count} records, chain intact")
            return
        more = len(report.breaks) - 1
        also = f" ({more} more break{'s' if more > 1 else ''} listed)" if more else ""
        raise CommandError(
            f"{report.count} records, chain broken at {report.breaks[0]}{also}",
            returncode=RUN_ERROR,
        )

    def _export(
        self,
        *,
        since: datetime | None,
        until: datetime | None,
        tenant: str | None,
        format: str,
        output: Path | None,
        **options: Any,
    ) -> None:
        if since is not None and until is not None and since >= until:
            raise CommandError(
                "--since must come before --until.", returncode=BAD_ARGUMENTS
            )
        rows = records_between(since, until, tenant)
        if output is None:
            write_rows(rows, self.stdout, format)
            return
        try:
            with output.open("w", newline="") as out:
                count = write_rows(rows, out, format)
        except OSError as error:
            raise CommandError(
                f"Cannot write {output}: {error}", returncode=BAD_ARGUMENTS
            ) from None
        self.stdout.write(f"{count} records written to {output}")
