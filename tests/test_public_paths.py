"""The 0.1 layout's dotted paths keep working after the move into packages: settings
strings, task paths stored in queues, and imports in users' code (deuz_django._moved)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from django.utils.module_loading import import_string

PATHS = [
    line
    for line in (Path(__file__).parent / "fixtures/public_paths_0_1.txt")
    .read_text()
    .splitlines()
    if line and not line.startswith("#")
]


@pytest.mark.parametrize("path", PATHS)
def test_every_public_path_of_the_flat_layout_imports(path: str) -> None:
    assert import_string(path) is not None


def test_an_old_module_is_the_module_it_moved_to() -> None:
    old = importlib.import_module("deuz_django.journal")
    new = importlib.import_module("deuz_django.storage.stream_journal")
    assert old is new
    assert import_string("deuz_django.webhooks.verify_signature") is import_string(
        "deuz_django.notifications.webhooks.verify_signature"
    )


def test_old_names_need_no_django_setup_to_be_found() -> None:
    """The finder is installed by the package itself, as any process imports it."""
    code = "import deuz_django.core; import sys; print('deuz_django._moved' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "True", done.stderr
