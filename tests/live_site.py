"""A real deployment for tests: its own database, real daphne processes, shell scripts.

The site's database is a SQLite file under the test's tmp dir, or — when the suite runs on
PostgreSQL (``DATABASE_URL=postgres://…``) — a database created for the site and dropped
afterwards. Everything the test does to the site goes through subprocesses or HTTP, as a
user's would.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
# The example project's Celery worker (DEUZ_TASKS=celery); options follow.
CELERY_WORKER = [sys.executable, "-m", "celery", "-A", "example_project", "worker"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def descendants(pid: int) -> list[int]:
    """The processes forked from ``pid``, at any depth (from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process started in a session of its own, with every descendant (a
    worker's pool; RQ's work horses, which leave the session)."""
    for pid in descendants(process.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def wait_for_port(
    port: int, process: subprocess.Popen[bytes], seconds: float = 20
) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port}")


class Daphne:
    """One daphne process serving the site."""

    def __init__(self, site: LiveSite, port: int | None = None) -> None:
        self.site = site
        self.port = port or free_port()
        self.log = site.tmp / f"daphne-{self.port}-{uuid.uuid4().hex[:6]}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "daphne"),
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "example_project.asgi:application",
                ],
                cwd=ROOT,
                env=site.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_for_port(self.port, self.process)

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/deuz/"

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever, as in a crash."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


class LiveSite:
    def __init__(
        self, tmp: Path, *, database_prefix: str = "deuz_live", **env: str
    ) -> None:
        self.tmp = tmp
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **env}
        self.env.pop("DEUZ_TEST_EFFECTS", None)
        self._pg_name: str | None = None
        base = os.environ.get("DATABASE_URL", "")
        if base.startswith("postgres"):
            self._pg_name = f"{database_prefix}_{uuid.uuid4().hex[:10]}"
            self._pg_admin(f'CREATE DATABASE "{self._pg_name}"')
            self.env["DATABASE_URL"] = urlunparse(
                urlparse(base)._replace(path="/" + self._pg_name)
            )
        else:
            self.env["DATABASE_URL"] = f"sqlite:///{tmp / 'site.sqlite3'}"
        self.servers: list[Daphne] = []
        self.manage("migrate", "--noinput", "-v", "0")

    def _pg_admin(self, sql: str) -> None:
        import psycopg

        parsed = urlparse(os.environ["DATABASE_URL"])
        with psycopg.connect(
            host=parsed.hostname,
            port=parsed.port or 5432,
            user=parsed.username or "postgres",
            dbname="postgres",
            autocommit=True,
        ) as connection:
            connection.execute(sql)

    def manage(
        self, *args: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    def script(self, code: str, **env: str) -> Any:
        """Run ``code`` with Django set up against the site; it prints one JSON value."""
        prelude = "import django, json\ndjango.setup()\n"
        done = subprocess.run(
            [sys.executable, "-c", prelude + textwrap.dedent(code)],
            cwd=ROOT,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(f"site script failed:\n{done.stderr}")
        lines = done.stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else None

    def user(self, username: str, *perms: str, staff: bool = False) -> str:
        """Create a user with ``perms`` and return a session cookie header for them."""
        return str(
            self.script(
                f"""
                from django.contrib.auth.models import Permission, User
                from django.test import Client
                user = User.objects.create_user({username!r}, password="pw", is_staff={staff!r})
                for perm in {list(perms)!r}:
                    app, code = perm.split(".")
                    user.user_permissions.add(
                        Permission.objects.get(content_type__app_label=app, codename=code)
                    )
                client = Client()
                client.force_login(user)
                print(json.dumps("sessionid=" + client.cookies["sessionid"].value))
                """
            )
        )

    def run_column(self, run_id: str, column: str) -> str:
        """One column of the run's row, read straight from the site's database: cheap
        enough to poll, and independent of the processes under test."""
        query = f"SELECT {column} FROM deuz_django_run WHERE run_id = %s"
        url = urlparse(self.env["DATABASE_URL"])
        if url.scheme == "sqlite":
            with contextlib.closing(sqlite3.connect(url.path)) as db:
                row = db.execute(query.replace("%s", "?"), (run_id,)).fetchone()
        else:
            import psycopg

            with psycopg.connect(
                host=url.hostname,
                port=url.port or 5432,
                user=url.username,
                dbname=url.path.lstrip("/"),
            ) as db:
                row = db.execute(query, (run_id,)).fetchone()
        return str(row[0]) if row else ""

    def daphne(self, port: int | None = None) -> Daphne:
        server = Daphne(self, port)
        self.servers.append(server)
        return server

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        if self._pg_name is not None:
            self._pg_admin(f'DROP DATABASE IF EXISTS "{self._pg_name}" WITH (FORCE)')
