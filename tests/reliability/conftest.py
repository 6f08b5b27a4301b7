"""Fixtures of the reliability tests: the Django tests' users and effect log, and a gate.

These tests use real threads and processes, so they run with ``transaction=True``: what a
test commits is what another thread's connection or a ``manage.py`` subprocess sees.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.django.conftest import (
    effects,
    handed_off_legs_end_with_their_test,
    make_user,
)

__all__ = ["effects", "gate", "handed_off_legs_end_with_their_test", "make_user"]


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The file the ``hold`` tool waits for; opened at teardown so no leg is left waiting."""
    path = tmp_path / "gate"
    monkeypatch.setenv("DEUZ_TEST_GATE", str(path))
    yield path
    path.touch()
