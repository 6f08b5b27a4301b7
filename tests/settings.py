"""Test settings: the example project's, with the test agents registered.

DATABASE_URL switches the database (SQLite by default); REDIS_URL the channel layer.
"""

from example_project.settings import *  # noqa: F403
from example_project.settings import DEUZ

DEUZ = {
    **DEUZ,
    "AGENTS": {
        **DEUZ["AGENTS"],
        "scripted": "tests.django.agents.scripted",
        "slow": "tests.django.agents.slow",
        "gated": "tests.django.agents.gated",
        "nested": "tests.django.agents.nested",
    },
    "LEASE_SECONDS": 30,
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
