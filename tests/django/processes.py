"""Running ``manage.py`` in subprocesses against the test's own database.

The test database is a file on SQLite (see tests/settings.py) and ``test_<name>`` on
PostgreSQL; ``DATABASE_URL`` points a subprocess at exactly that database, so whatever a
``transaction=True`` test committed is what the subprocess sees, and the reverse.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.db import connection

MANAGE = Path(__file__).resolve().parents[2] / "manage.py"
WAIT_SECONDS = 60.0


def database_url() -> str:
    """A ``DATABASE_URL`` for the database this test runs on."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    credentials = quote(db["USER"] or "") + (
        f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else ""
    )
    return (
        f"postgres://{credentials}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
        f"/{db['NAME']}"
    )


def manage_env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url(),
        **extra,
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


def start_manage(*args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(MANAGE), *args],
        env=manage_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(MANAGE), *args],
        env=manage_env(**env),
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
    )


def wait_until(condition: Callable[[], Any], what: str) -> Any:
    """Poll ``condition`` until it is truthy (a guard against hanging, not a timing test)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)
    return value
