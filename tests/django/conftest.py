from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission, User
from django.db import connections

from deuz_django.routing import websocket_urlpatterns
from deuz_django.runs.continuing import join_handed_off
from tests.api.support import fresh_throttles, started  # noqa: F401  (autouse)

from .agents import recorded_effects
from .notify_support import receiver  # noqa: F401  (a fixture)


@pytest.fixture(scope="session", autouse=True)
def close_sync_thread_connections(django_db_setup: Any) -> Iterator[None]:
    """Async tests run their database calls on asgiref's one thread for
    ``sync_to_async``, whose connections outlive the tests: closed before the test
    database is dropped (PostgreSQL refuses to drop a database in use)."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=30)


@pytest.fixture(autouse=True)
def handed_off_legs_end_with_their_test() -> Iterator[None]:
    """A request's leg runs in the background (``continuation.hand_off``: with the
    immediate backend a thread of its own, or the running event loop), on database
    connections of its own. A test that looks at what the leg did calls
    ``join_handed_off()`` first, and is ``transaction=True``: the leg cannot see rows
    of a test's transaction. None outlives its test."""
    yield
    join_handed_off(timeout=60)


@pytest.fixture
def make_user(db: Any) -> Callable[..., User]:
    """A user with the given permissions (``"app.codename"`` strings)."""

    def make(
        username: str, *perms: str, staff: bool = False, superuser: bool = False
    ) -> User:
        if superuser:
            return User.objects.create_superuser(username, password="pw")
        user = User.objects.create_user(username, password="pw", is_staff=staff)
        for perm in perms:
            app_label, codename = perm.split(".")
            user.user_permissions.add(
                Permission.objects.get(
                    content_type__app_label=app_label, codename=codename
                )
            )
        return User.objects.get(pk=user.pk)  # fresh permission cache

    return make


@pytest.fixture
def effects(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[str]]:
    """Tool side effects recorded by tests.django.agents, read back as lines."""
    monkeypatch.setenv("DEUZ_TEST_EFFECTS", str(tmp_path / "effects.log"))
    return recorded_effects


@pytest.fixture
def ann(make_user: Callable[..., User]) -> User:
    return make_user("ann")


@pytest.fixture
def run(ann: User) -> Any:
    """A run of the ``gated`` agent owned by ann, suspended on its two approvals."""
    return started(ann)


@pytest.fixture
async def ws_as() -> AsyncIterator[Callable[[User], Awaitable[WebsocketCommunicator]]]:
    """Open WebSockets to the deuz consumer as a user; all closed at teardown."""
    opened: list[WebsocketCommunicator] = []

    async def open_as(user: User) -> WebsocketCommunicator:
        ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/deuz/")
        ws.scope["user"] = user
        connected, _ = await ws.connect()
        assert connected
        opened.append(ws)
        return ws

    yield open_as
    for ws in opened:
        await ws.disconnect()
