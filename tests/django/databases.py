"""One test database per test process, removed at exit even when a teardown failed.

The test database is named after the process id, so test sessions running side by side on
one machine (or one PostgreSQL server) never drop each other's database. On SQLite it is
a file rather than the in-memory default: concurrency tests need real locking between
threads (shared-cache memory databases fail fast with "table is locked"), and subprocesses
(``manage.py deuz``, ``db_worker``) must open the same database.

Connections that outlive the test run in worker threads can leave SQLite's ``-wal`` and
``-shm`` files behind, or make PostgreSQL refuse ``DROP DATABASE``; at the test process's
exit whatever is left is removed (``WITH (FORCE)`` on PostgreSQL).
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def per_process_test_database(database: dict[str, Any]) -> None:
    """Name ``database``'s test database after this process, and clean it up at exit."""
    pid = os.getpid()
    if database["ENGINE"] == "django.db.backends.sqlite3":
        path = Path(tempfile.gettempdir()) / f"deuz-test-{pid}.sqlite3"
        database["TEST"] = {"NAME": str(path)}
        cleanup = _remove_files(path)
    else:
        name = f"test_{database['NAME']}_{pid}"
        database["TEST"] = {"NAME": name}
        cleanup = _drop_database(database, name)
    if (
        "pytest" in sys.modules
    ):  # the test runner, not a subprocess reading these settings
        atexit.register(cleanup)


def _remove_files(path: Path) -> Any:
    def remove() -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    return remove


def _drop_database(database: dict[str, Any], name: str) -> Any:
    def drop() -> None:
        import psycopg

        try:
            with psycopg.connect(
                host=database["HOST"] or None,
                port=database["PORT"] or None,
                user=database["USER"] or None,
                password=database["PASSWORD"] or None,
                dbname="postgres",
                autocommit=True,
                connect_timeout=5,
            ) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except psycopg.Error:
            pass  # the server is gone; nothing to clean up from here

    return drop
