"""Test settings: the example project's, with the test agents registered.

DATABASE_URL switches the database (SQLite by default); REDIS_URL the channel layer;
DEUZ_LEASE_SECONDS the lease length (crash tests run their subprocess with a short one).

On SQLite the test database is a file, not the in-memory default: concurrency tests need
real locking between threads (shared-cache memory databases fail fast with "table is
locked"), and subprocesses (``manage.py deuz``, ``db_worker``) open the same file. Test
databases carry the process id, so test sessions running side by side on one machine (or
one PostgreSQL server) never drop each other's database.
"""

import os
import tempfile
from pathlib import Path

from example_project.settings import *  # noqa: F403
from example_project.settings import DATABASES, DEUZ, INSTALLED_APPS

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {
        "NAME": str(Path(tempfile.gettempdir()) / f"deuz-test-{os.getpid()}.sqlite3")
    }
else:
    DATABASES["default"]["TEST"] = {
        "NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"
    }
if "django_tasks_db" not in INSTALLED_APPS:
    INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks_db"]

DEUZ = {
    **DEUZ,
    "AGENTS": {
        **DEUZ["AGENTS"],
        "scripted": "tests.django.agents.scripted",
        "slow": "tests.django.agents.slow",
        "gated": "tests.django.agents.gated",
        "nested": "tests.django.agents.nested",
        "held": "tests.django.agents.held",
        "streamer": "tests.django.stream_agents.streamer",
        "asker": "tests.django.stream_agents.asker",
    },
    "LEASE_SECONDS": float(os.environ.get("DEUZ_LEASE_SECONDS", "30")),
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
