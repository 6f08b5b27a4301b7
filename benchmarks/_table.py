"""What every benchmark shares: interleaved repeats, medians, a table, and ``--json``.

A benchmark measures its variants side by side (``interleaved``), so machine noise hits
them alike, then calls ``report`` with rows of figures: a plain table by default, the same
figures as one JSON line with ``--json``.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

Row = Mapping[str, object]
ROOT = Path(__file__).resolve().parents[1]


def interleaved(
    variants: Mapping[str, Callable[[], float]], repeats: int
) -> dict[str, list[float]]:
    """Call each variant once per round, ``repeats`` rounds; each returns its own timing.

    A collection runs before each call so one variant's garbage is not another's pause.
    """
    timings: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, measure in variants.items():
            gc.collect()
            timings[name].append(measure())
    return timings


def worker_json(script: str, *args: str) -> Any:
    """Run ``script`` with ``args`` in a fresh interpreter (Django settings are per
    process) and return the JSON its last line printed."""
    process = subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, check=False
    )
    if process.returncode != 0:
        raise RuntimeError(f"worker {' '.join(args)} failed:\n{process.stderr}")
    return json.loads(process.stdout.splitlines()[-1])


@contextmanager
def code_at(
    revision: str | None, paths: Sequence[str] = ("deuz_django", "example_project")
) -> Iterator[Path | None]:
    """``paths`` of the repository as of ``revision``, extracted into a scratch directory
    (``None`` when no revision is asked for): old code to measure beside the current."""
    if revision is None:
        yield None
        return
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", revision, *paths],
            capture_output=True,
            check=True,
        )
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        yield Path(tmp)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def median_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float:
    """The median of the per-round ratios: rounds ran side by side, so compare in-round."""
    return statistics.median(
        n / d for n, d in zip(numerators, denominators, strict=True)
    )


def _cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def _table(title: str, rows: Sequence[Row]) -> str:
    columns = list(rows[0])
    cells = [[_cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    # Text (the first column) reads left-aligned, figures right-aligned.
    align = [str.ljust if isinstance(rows[0][c], str) else str.rjust for c in columns]
    line = "  ".join("-" * w for w in widths)
    head = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    body = [
        "  ".join(a(v, w) for a, v, w in zip(align, r, widths, strict=True))
        for r in cells
    ]
    return "\n".join([title, line, head, line, *body, line])


def report(
    benchmark: str,
    tables: Mapping[str, Sequence[Row]],
    *,
    target: str,
    as_json: bool,
) -> None:
    """Print the tables (or one JSON line) with what the run was measured on."""
    context = {
        "benchmark": benchmark,
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "target": target,
    }
    if as_json:
        print(json.dumps({**context, "tables": tables}, separators=(",", ":")))
        return
    print(
        f"{benchmark} — {context['date']}, Python {context['python']}, "
        f"{context['machine']} (medians; ratios are medians of in-round ratios)"
    )
    print(f"target: {target}\n")
    print("\n\n".join(_table(title, rows) for title, rows in tables.items()))


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--json", action="store_true", help="print the figures as one JSON line"
    )
    return parser.parse_args()
