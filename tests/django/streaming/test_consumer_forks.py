"""The WebSocket's ``fork`` frame: the new run is named (``forked``) and may be
followed; bad input, another user's run and a taken id are error frames, and the
socket stays open."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from deuz_django.models import Run
from deuz_django.runs.continuing import ajoin_handed_off
from tests.django.fork_support import asking

pytestmark = pytest.mark.django_db(transaction=True)
Connect = Callable[[Any], Awaitable[WebsocketCommunicator]]


@pytest.fixture
async def ann(make_user: Any) -> Any:
    return await sync_to_async(make_user)("ann")


async def send(ws: WebsocketCommunicator, **frame: Any) -> dict[str, Any]:
    await ws.send_json_to({"type": "fork", **frame})
    answer: dict[str, Any] = await ws.receive_json_from(timeout=10)
    return answer


async def test_a_fork_frame_names_the_fork_which_the_client_may_follow(
    ws_as: Connect, ann: Any
) -> None:
    parent = await sync_to_async(asking)(ann)
    ws = await ws_as(ann)
    edit = {"toolCallId": "f2", "input": {"to": "bob@example.com"}}
    answer = await send(
        ws, runId=parent.run_id, step=1, withTurn=True, edit=edit, forkRunId="ws-fork"
    )
    assert answer == {
        "type": "forked",
        "runId": parent.run_id,
        "forkRunId": "ws-fork",
        "status": "running",
    }
    await ws.send_json_to({"type": "subscribe", "runId": "ws-fork"})
    requests = []
    while True:
        frame = await ws.receive_json_from(timeout=10)
        if frame.get("type") == "done":
            break
        part = frame.get("part", {})
        if part.get("type") == "tool-approval-request":
            requests.append(part)
    assert [r["input"] for r in requests] == [{"to": "bob@example.com"}]
    await ajoin_handed_off()
    fork = await Run.objects.aget(run_id="ws-fork")
    assert (fork.status, fork.forked_from_id) == ("suspended", parent.pk)


@pytest.mark.parametrize(
    ("frame", "code", "starts"),
    [
        ({"step": 9}, "invalid", "step:"),
        ({"step": 1, "edit": {"message": "x"}, "withTurn": True}, "invalid", "edit."),
        ({}, "missing_field", "step:"),
        ({"step": "1"}, "invalid_field", "step:"),
    ],
)
async def test_bad_input_is_an_error_frame_and_nothing_is_written(
    ws_as: Connect, ann: Any, frame: dict[str, Any], code: str, starts: str
) -> None:
    parent = await sync_to_async(asking)(ann)
    ws = await ws_as(ann)
    answer = await send(ws, runId=parent.run_id, **frame)
    assert (answer["type"], answer["code"], answer["frame"]) == ("error", code, "fork")
    assert answer["message"].startswith(starts), answer
    assert await Run.objects.acount() == 1
    assert (await send(ws, runId=parent.run_id, step=1))["type"] == "forked"


async def test_another_users_run_is_not_found_and_a_taken_id_a_conflict(
    ws_as: Connect, ann: Any, make_user: Any
) -> None:
    parent = await sync_to_async(asking)(ann)
    bob = await sync_to_async(make_user)("bob")
    answer = await send(await ws_as(bob), runId=parent.run_id, step=1)
    assert (answer["type"], answer["code"]) == ("error", "not_found")
    taken = await send(
        await ws_as(ann), runId=parent.run_id, step=1, forkRunId=parent.run_id
    )
    assert (taken["type"], taken["code"]) == ("error", "run_exists")
    await ajoin_handed_off()
