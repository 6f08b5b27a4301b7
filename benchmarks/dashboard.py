"""What the admin dashboard costs on a large table: the whole page (every chart's queries
and rendering), seeded with ``RUNS`` root runs over 90 days and an approval for 30 % of
them, on SQLite and PostgreSQL — with the dashboard's indexes, and with them dropped.

Each backend runs in its own subprocess (Django settings are per process) against a scratch
database, dropped afterwards. The page is fetched through Django's test client as a
superuser: the last 30 days of all agents, the last 365 days, and one agent's 30 days.

    python benchmarks/dashboard.py [--json] [--runs N]

``DEUZ_BENCH_PG`` (default ``postgres://postgres@127.0.0.1:5432/postgres``) names the
PostgreSQL server; without one reachable its rows are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from _table import report
from store_save import scratch_postgres

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUNS = 100_000
REPEATS = 7
BATCH = 5_000
DAYS = 365  # the seeded runs spread over a year: a 30-day page reads ~8 % of them
AGENTS = ("support", "research", "assistant", "triage", "billing")
TOOLS = tuple(f"tool_{n}" for n in range(8))
PAGES = {
    "30 days": {},
    "365 days": {"period": "365"},
    "one agent, 30 days": {"agent": "support"},
}
TARGET = "the page in well under a second with 100k runs (PostgreSQL)"


def seed(runs: int) -> int:
    """``runs`` root runs over 90 days and approvals for 30 % of them; their count."""
    from django.utils import timezone

    from deuz_django.models import Approval, Run

    # Seeding only: let the rows keep the times given here instead of "now".
    for model in (Run, Approval):
        model._meta.get_field("created_at").auto_now_add = False  # type: ignore[attr-defined]
    rng = random.Random(42)
    now = timezone.now()
    approvals = 0
    for start in range(0, runs, BATCH):
        batch = []
        for n in range(start, min(runs, start + BATCH)):
            tokens_in, tokens_out = rng.randint(500, 20_000), rng.randint(50, 4000)
            batch.append(
                Run(
                    run_id=f"run-{n}",
                    agent=rng.choice(AGENTS),
                    status=rng.choices(
                        ("completed", "suspended", "running"), (90, 8, 2)
                    )[0],
                    usage={
                        "inputTokens": tokens_in,
                        "outputTokens": tokens_out,
                        "totalTokens": tokens_in + tokens_out,
                    },
                    last_error="ModelTimeoutError: timed out"
                    if rng.random() < 0.03
                    else "",
                    created_at=now - timedelta(minutes=rng.randint(0, DAYS * 1440)),
                )
            )
        made = Run.objects.bulk_create(batch)
        gated = []
        for run in made:
            if rng.random() >= 0.3:
                continue
            waiting = rng.random() < 0.01
            gated.append(
                Approval(
                    run=run,
                    approval_id=f"a-{run.run_id}",
                    tool_call_id=f"c-{run.run_id}",
                    tool_name=rng.choice(TOOLS),
                    status="pending" if waiting else rng.choice(("approved", "denied")),
                    created_at=run.created_at,
                    decided_at=None
                    if waiting
                    else run.created_at + timedelta(seconds=rng.randint(5, 7200)),
                )
            )
        Approval.objects.bulk_create(gated)
        approvals += len(gated)
    return approvals


def page_ms(client: Any, query: dict[str, str]) -> float:
    timings = []
    for _ in range(REPEATS + 1):  # the first is a warm-up
        start = time.perf_counter()
        response = client.get("/admin/deuz_django/dashboard/", query)
        timings.append(time.perf_counter() - start)
        assert response.status_code == 200, response.status_code
    return statistics.median(timings[1:]) * 1000


def drop_dashboard_indexes() -> None:
    from django.db import connection

    from deuz_django.models import Approval, Run

    with connection.schema_editor() as editor:
        for model in (Run, Approval):
            for index in model._meta.indexes:
                editor.remove_index(model, index)


def analyze() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def measure(url: str, runs: int) -> dict[str, Any]:
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    settings.ALLOWED_HOSTS = ["testserver"]
    call_command("migrate", verbosity=0)
    start = time.perf_counter()
    approvals = seed(runs)
    seeded = time.perf_counter() - start
    analyze()
    client = Client()
    client.force_login(User.objects.create_superuser("bench", password="x"))
    indexed = {name: page_ms(client, query) for name, query in PAGES.items()}
    drop_dashboard_indexes()
    analyze()
    bare = {name: page_ms(client, query) for name, query in PAGES.items()}
    return {
        "runs": runs,
        "approvals": approvals,
        "seed s": seeded,
        "indexed": indexed,
        "bare": bare,
    }


@contextmanager
def databases() -> Iterator[list[tuple[str, str]]]:
    """A scratch SQLite file and, when reachable, a scratch PostgreSQL database."""
    with tempfile.TemporaryDirectory() as tmp, scratch_postgres() as postgres:
        found = [("SQLite", f"sqlite:///{tmp}/bench.sqlite3")]
        yield found if postgres is None else [*found, ("PostgreSQL", postgres)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--worker", nargs=2, metavar=("URL", "RUNS"))
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker[0], int(args.worker[1]))))
        return
    rows = []
    with databases() as found:
        for backend, url in found:
            done = subprocess.run(
                [sys.executable, __file__, "--worker", url, str(args.runs)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise RuntimeError(f"{backend} worker failed:\n{done.stderr}")
            result = json.loads(done.stdout.splitlines()[-1])
            for page in PAGES:
                rows.append(
                    {
                        "backend": backend,
                        "page": page,
                        "runs": result["runs"],
                        "approvals": result["approvals"],
                        "ms (indexes)": result["indexed"][page],
                        "ms (no dashboard indexes)": result["bare"][page],
                    }
                )
    report(
        "dashboard",
        {"the dashboard page, median of 7 fetches": rows},
        target=TARGET,
        as_json=args.json,
    )


if __name__ == "__main__":
    main()
