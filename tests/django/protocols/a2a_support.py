"""Helpers the A2A tests share: users with API tokens on a live site, clients of the
official SDK (``a2a-sdk``) speaking the HTTP+JSON binding, and messages."""

from __future__ import annotations

from typing import Any

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.types import a2a_pb2 as a2a
from google.protobuf import json_format, struct_pb2

from tests.live_site import Daphne, LiveSite


def api_token(site: LiveSite, username: str) -> str:
    """A user of the site and their DRF token."""
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


def agent_url(server: Daphne, agent: str) -> str:
    return f"{server.http}/api/deuz/a2a/{agent}"


def token_http(token: str) -> httpx.AsyncClient:
    """HTTP signed in with ``token`` (the SDK's client never closes one it was given)."""
    return httpx.AsyncClient(
        headers={"Authorization": f"Token {token}"}, timeout=httpx.Timeout(60.0)
    )


async def sdk_client(
    server: Daphne, agent: str, http: httpx.AsyncClient, *, streaming: bool = False
) -> Client:
    """A client of the SDK, from the agent's card, over ``http``."""
    config = ClientConfig(
        httpx_client=http,
        streaming=streaming,
        supported_protocol_bindings=["HTTP+JSON"],
    )
    return await create_client(agent_url(server, agent), client_config=config)


def user_text(text: str) -> a2a.SendMessageRequest:
    return a2a.SendMessageRequest(
        message=a2a.Message(
            message_id="m-1", role=a2a.Role.ROLE_USER, parts=[a2a.Part(text=text)]
        )
    )


def verdicts(task_id: str, *items: dict[str, Any]) -> a2a.SendMessageRequest:
    data = struct_pb2.Value()
    json_format.ParseDict({"verdicts": list(items)}, data)
    return a2a.SendMessageRequest(
        message=a2a.Message(
            message_id="m-2",
            task_id=task_id,
            role=a2a.Role.ROLE_USER,
            parts=[a2a.Part(data=data)],
        )
    )


async def send(client: Client, request: a2a.SendMessageRequest) -> a2a.Task:
    """A blocking ``message:send``: the task it answers with."""
    async for event in client.send_message(request):
        return event.task
    raise AssertionError("message:send answered nothing")


def pending(found: a2a.Task) -> list[dict[str, Any]]:
    """The pending approvals the task's status message carries."""
    for part in found.status.message.parts:
        if part.HasField("data"):
            return list(json_format.MessageToDict(part.data)["pendingApprovals"])
    raise AssertionError("no data part in the status message")


def artifact_text(found: a2a.Task) -> str:
    return "".join(p.text for a in found.artifacts for p in a.parts)
