"""The SSE twin: the journal over HTTP as the Deuz UI wire v2, with auth and replay."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import AsyncClient, override_settings

from deuz_django import services

pytestmark = pytest.mark.django_db(transaction=True)


async def read_body(response: Any) -> str:
    chunks = [chunk async for chunk in response.streaming_content]
    return b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks).decode()


@pytest.fixture
async def finished_run(make_user: Any) -> tuple[Any, str]:
    owner = await sync_to_async(make_user)("ann")
    run = await services.astart_run(
        agent="scripted", messages=[{"role": "user", "content": "hi"}], owner=owner
    )
    await services.aresume_run(run.run_id)
    return owner, run.run_id


def frames(body: str) -> list[tuple[int | None, str]]:
    out = []
    for block in body.split("\n\n"):
        if not block:
            continue
        lines = block.split("\n")
        seq = int(lines[0][4:]) if lines[0].startswith("id: ") else None
        out.append((seq, lines[-1][6:]))
    return out


async def test_the_stream_replays_the_journal_as_wire_v2(
    finished_run: tuple[Any, str],
) -> None:
    owner, run_id = finished_run
    client = AsyncClient()
    await client.aforce_login(owner)
    response = await client.get(f"/api/deuz/runs/{run_id}/stream")
    assert response.status_code == 200
    assert response["content-type"] == "text/event-stream; charset=utf-8"
    assert response["cache-control"] == "no-cache"
    assert response["x-deuz-stream"] == "v2"
    got = frames(await read_body(response))
    assert [seq for seq, _ in got] == list(range(len(got)))
    assert got[0][1] == f'{{"type":"start","messageId":"{run_id}"}}'
    assert got[-1][1] == "[DONE]"


async def test_last_event_id_replays_only_the_rest(
    finished_run: tuple[Any, str],
) -> None:
    owner, run_id = finished_run
    client = AsyncClient()
    await client.aforce_login(owner)
    full = frames(await read_body(await client.get(f"/api/deuz/runs/{run_id}/stream")))
    rest = frames(
        await read_body(
            await client.get(
                f"/api/deuz/runs/{run_id}/stream", headers={"Last-Event-ID": "5"}
            )
        )
    )
    assert rest == full[6:]
    end = await read_body(
        await client.get(
            f"/api/deuz/runs/{run_id}/stream",
            headers={"Last-Event-ID": str(full[-1][0])},
        )
    )
    assert end == f"id: {full[-1][0]}\ndata: [DONE]\n\n"  # D5: nothing re-driven


async def test_v1_clients_get_frames_without_ids(finished_run: tuple[Any, str]) -> None:
    owner, run_id = finished_run
    client = AsyncClient()
    await client.aforce_login(owner)
    response = await client.get(
        f"/api/deuz/runs/{run_id}/stream", headers={"x-deuz-stream": "v1"}
    )
    assert response["x-deuz-stream"] == "v1"
    body = await read_body(response)
    assert "id: " not in body
    assert '"tool-state"' not in body
    assert body.endswith("data: [DONE]\n\n")


async def test_strangers_get_404_and_anonymous_401(
    finished_run: tuple[Any, str], make_user: Any
) -> None:
    _, run_id = finished_run
    anonymous = await AsyncClient().get(f"/api/deuz/runs/{run_id}/stream")
    assert anonymous.status_code == 401
    stranger = AsyncClient()
    await stranger.aforce_login(await sync_to_async(make_user)("eve"))
    assert (await stranger.get(f"/api/deuz/runs/{run_id}/stream")).status_code == 404
    assert (await stranger.get("/api/deuz/runs/nope/stream")).status_code == 404


async def test_token_authentication_works_for_the_typescript_client(
    finished_run: tuple[Any, str],
) -> None:
    from rest_framework.authtoken.models import Token

    owner, run_id = finished_run
    token = await sync_to_async(Token.objects.create)(user=owner)
    response = await AsyncClient().get(
        f"/api/deuz/runs/{run_id}/stream",
        headers={"Authorization": f"Token {token.key}"},
    )
    assert response.status_code == 200
    assert (await read_body(response)).endswith("data: [DONE]\n\n")


async def test_the_stream_authenticates_as_the_api_does_not_as_drfs_defaults(
    finished_run: tuple[Any, str],
) -> None:
    from rest_framework.authtoken.models import Token

    owner, run_id = finished_run
    url = f"/api/deuz/runs/{run_id}/stream"
    token = await sync_to_async(Token.objects.create)(user=owner)
    # A project whose own DRF default authenticates nobody: the stream still does.
    with override_settings(REST_FRAMEWORK={"DEFAULT_AUTHENTICATION_CLASSES": []}):
        response = await AsyncClient().get(
            url, headers={"Authorization": f"Token {token.key}"}
        )
        assert response.status_code == 200
        await read_body(response)
    basic = ["rest_framework.authentication.BasicAuthentication"]
    with override_settings(DEUZ={**settings.DEUZ, "API_AUTHENTICATION_CLASSES": basic}):
        response = await AsyncClient().get(
            url,
            headers={"Authorization": "Basic YW5uOnB3"},  # ann:pw
        )
        assert response.status_code == 200
        await read_body(response)
        browser = AsyncClient()
        await browser.aforce_login(owner)
        assert (await browser.get(url)).status_code == 401  # no session here
