"""A live site for the protocol tests: its own database (SQLite, or PostgreSQL when the
suite runs there), a real daphne, and a user with an API token."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tests.live_site import LiveSite

from .node_client import install


@pytest.fixture(scope="session")
def node_client() -> None:
    install()


@pytest.fixture
def effects(tmp_path: Path) -> Path:
    return tmp_path / "effects.log"


@pytest.fixture
def site(tmp_path: Path, effects: Path, node_client: None) -> Iterator[LiveSite]:
    env = {"DEUZ_TEST_EFFECTS": str(effects), "DEUZ_LEASE_SECONDS": "2"}
    with closing(LiveSite(tmp_path, database_prefix="deuz_agui", **env)) as live:
        live.env["DEUZ_TEST_EFFECTS"] = str(effects)  # LiveSite drops the test's own
        yield live


def token_for(site: LiveSite, username: str) -> str:
    """A user of the site and their API token."""
    return str(
        site.script(
            f"""
            from django.contrib.auth.models import User
            from rest_framework.authtoken.models import Token
            user = User.objects.create_user({username!r}, password="pw")
            print(json.dumps(Token.objects.create(user=user).key))
            """
        )
    )
