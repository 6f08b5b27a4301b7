"""What the soak holds a deployment to, read after the load: the journals against what
every client received, the tools' effects log, and the latency quantiles."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.soak_clients import RunRecord
from tests.live_site import LiveSite


def query(site: LiveSite, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(site.env["DATABASE_URL"]) as db:
        return db.execute(sql).fetchall()


Journal = dict[str, dict[int, Any]]  # run id -> seq -> part (or "done")


def read_journals(site: LiveSite) -> Journal:
    journals: Journal = {}
    for run_id, seq, data in query(
        site,
        "SELECT r.run_id, e.seq, e.part FROM deuz_django_streamjournalentry e "
        "JOIN deuz_django_run r ON r.id = e.run_id",
    ):
        part = json.loads(data)
        journals.setdefault(run_id, {})[seq] = (
            "done" if part == {"type": "done"} else part
        )
    return journals


def lost_parts(journals: Journal, records: list[RunRecord]) -> int:
    """Journaled records a client never received, or received different."""
    return sum(
        record.parts.get(seq) != part
        for record in records
        for seq, part in journals.get(record.run_id, {}).items()
    )


def parts_of(journal: dict[int, Any]) -> int:
    return sum(part != "done" for part in journal.values())


def interrupted(journals: Journal) -> int:
    """Runs with a step started twice: a leg died inside it and another re-ran it."""
    return sum(
        len(starts) != len(set(starts))
        for starts in (
            [
                p["step"]
                for p in journal.values()
                if p != "done" and p["type"] == "step-start"
            ]
            for journal in journals.values()
        )
    )


def duplicated_effects(effects: Path) -> tuple[int, int]:
    """Tool executions beyond the first of a call, and the calls that ran."""
    lines = effects.read_text().splitlines() if effects.exists() else []
    counts = Counter(lines)
    return sum(n - 1 for n in counts.values()), len(counts)


def quantile(values: list[float], k: int) -> float | None:
    """The k-th of 20 quantiles (10: median, 19: p95) in ms; ``None`` without values."""
    if len(values) < 2:
        return None
    return statistics.quantiles(values, n=20)[k - 1] * 1000
