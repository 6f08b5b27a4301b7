from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from example_project import agents


@pytest.fixture
def shop(transactional_db: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, User]:
    """The demo's users and orders, answers streamed without the word-by-word delay."""
    monkeypatch.setattr(agents, "STREAM_DELAY", 0.0)
    call_command("demo_setup", stdout=io.StringIO())
    return {
        name: User.objects.get(username=name) for name in ("customer", "staff", "lead")
    }
