"""Schemathesis against the served OpenAPI schema of a live site: every check, no 5xx.

The site (tests.live_site) runs daphne on its own database — SQLite here, a database of its
own when the suite runs on PostgreSQL — with the test agents registered, so starting runs,
deciding and resuming them all really happen. The user has every permission, so requests
reach the views instead of stopping at 403; the operations on one run work on a gated run
it owns (see schemathesis.toml).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live_site import Daphne, LiveSite

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CONFIG = Path(__file__).with_name("schemathesis.toml")
FUZZ_RUN = (
    "fuzz-gated"  # the run id schemathesis.toml pins for the run-level operations
)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[LiveSite]:
    live = LiveSite(tmp_path, DEUZ_API_READ_RATE="", DEUZ_API_WRITE_RATE="")
    yield live
    live.close()


def fuzzer_token(site: LiveSite) -> str:
    """A superuser's API token; the user also owns the gated run schemathesis.toml pins."""
    return str(
        site.script(
            f"""
            from django.contrib.auth.models import User
            from rest_framework.authtoken.models import Token
            from deuz_django.services import resume_run, start_run
            user = User.objects.create_superuser("fuzzer", password="pw")
            User.objects.create_user("bob", password="pw")  # the delegate of the examples
            messages = [{{"role": "user", "content": "Refund A-1 and tell Ann."}}]
            start_run(agent="gated", messages=messages, owner=user, run_id={FUZZ_RUN!r})
            resume_run({FUZZ_RUN!r})
            print(json.dumps(Token.objects.create(user=user).key))
            """
        )
    )


def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    site: LiveSite, tmp_path: Path
) -> None:
    token = fuzzer_token(site)
    server: Daphne = site.daphne()
    done = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(CONFIG),
            "run",
            f"{server.http}/api/deuz/schema/",
            "--checks",
            "all",
            "--header",
            f"Authorization: Token {token}",
            "--max-examples",
            "20",
            "--seed",
            "20260105",
            "--generation-allow-x00",
            "false",
            "--request-timeout",
            "30",
            "--workers",
            "1",
            "--no-color",
            "--report",
            "junit",
            "--report-dir",
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-5000:]
