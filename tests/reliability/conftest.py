"""Fixtures of the reliability tests: the Django tests' users and effect log, a gate, and
server-like child processes.

These tests use real threads and processes, so they run with ``transaction=True``: what a
test commits is what another thread's connection or a ``manage.py`` subprocess sees.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Protocol

import pytest

from tests.django.conftest import (
    effects,
    handed_off_legs_end_with_their_test,
    make_user,
)
from tests.django.processes import manage_env

__all__ = [
    "Children",
    "children",
    "effects",
    "gate",
    "handed_off_legs_end_with_their_test",
    "make_user",
]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The file the ``hold`` tool waits for; opened at teardown so no leg is left waiting."""
    path = tmp_path / "gate"
    monkeypatch.setenv("DEUZ_TEST_GATE", str(path))
    yield path
    path.touch()


class Children(Protocol):
    def __call__(self, run_ids: list[str], **env: str) -> subprocess.Popen[str]: ...


@pytest.fixture
def children(tmp_path: Path) -> Iterator[Children]:
    """Start :mod:`tests.reliability.crash_child` processes continuing ``run_ids``, with
    ``env`` (each one's output in ``child-<n>.log``); killed at teardown, stopped or
    not."""
    started: list[subprocess.Popen[str]] = []
    logs: list[IO[str]] = []

    def start(run_ids: list[str], **env: str) -> subprocess.Popen[str]:
        log = (tmp_path / f"child-{len(started)}.log").open("w")
        logs.append(log)
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.crash_child", *run_ids],
            cwd=ROOT,
            env=manage_env(**env),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append(child)
        return child

    yield start
    for child in started:
        if child.poll() is None:
            child.kill()
        child.wait()
    for log in logs:
        log.close()
