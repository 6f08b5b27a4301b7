"""The A2A server against real daphne processes, through the official SDK's client.

A run is a task: one suspended on an approval is ``INPUT_REQUIRED`` and is answered
through the protocol with the approval's signed token, checked like every verdict —
also after the server that suspended it was SIGKILLed. A stream dropped mid-answer is
picked up with ``tasks/{id}:subscribe`` without a lost or repeated chunk, and another
user's task is not found.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from a2a.client import A2ACardResolver, Client
from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf import json_format

from tests.live_site import Daphne, LiveSite

from .a2a_support import (
    agent_url,
    api_token,
    artifact_text,
    pending,
    sdk_client,
    send,
    token_http,
    user_text,
    verdicts,
)

pytestmark = pytest.mark.processes

CHUNKS = 30
STATE = a2a.TaskState


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    tmp = tmp_path_factory.mktemp("a2a")
    live = LiveSite(
        tmp,
        DEUZ_TEST_CHUNKS=str(CHUNKS),
        DEUZ_TEST_CHUNK_DELAY="0.05",
        DEUZ_LEASE_SECONDS="2",
    )
    live.env["DEUZ_TEST_EFFECTS"] = str(tmp / "effects.log")
    yield live
    live.close()


@pytest.fixture(scope="module")
def server(site: LiveSite) -> Daphne:
    return site.daphne()


@pytest.fixture
async def clients() -> AsyncIterator[list[httpx.AsyncClient]]:
    opened: list[httpx.AsyncClient] = []
    yield opened
    for http in opened:
        await http.aclose()


@pytest.fixture(scope="module")
def ann(site: LiveSite) -> str:
    return api_token(site, "ann")


async def connect(
    clients: list[httpx.AsyncClient],
    server: Daphne,
    agent: str,
    token: str,
    **options: bool,
) -> Client:
    """An SDK client of ``agent`` signed in with ``token``, closed after the test."""
    http = token_http(token)
    clients.append(http)
    return await sdk_client(server, agent, http, **options)


def effects(site: LiveSite) -> list[str]:
    path = Path(site.env["DEUZ_TEST_EFFECTS"])
    return path.read_text().splitlines() if path.exists() else []


def answer_text(prefix: str) -> str:
    return "".join(f"{prefix}{i} " for i in range(CHUNKS))


async def test_the_card_names_the_binding_and_the_api_authentication(
    server: Daphne,
) -> None:
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, agent_url(server, "asker")).get_agent_card()
    assert card.name == "asker"
    (interface,) = card.supported_interfaces
    assert interface.protocol_binding == "HTTP+JSON"
    assert interface.protocol_version == "1.0"
    assert interface.url == agent_url(server, "asker")
    assert card.capabilities.streaming
    assert set(card.security_schemes) == {"token", "session"}
    assert [s.name for s in card.skills] == ["send_email"]


async def test_an_unsigned_caller_is_refused(server: Daphne) -> None:
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{agent_url(server, 'asker')}/message:send", json={})
    assert answer.status_code == 401
    assert answer.json()["error"]["status"] == "UNAUTHENTICATED"


async def test_an_approval_is_input_required_and_answered_with_its_signed_token(
    site: LiveSite, server: Daphne, ann: str, clients: list[httpx.AsyncClient]
) -> None:
    client = await connect(clients, server, "asker", ann)
    task = await send(client, user_text("Mail Ann."))
    assert task.status.state == STATE.TASK_STATE_INPUT_REQUIRED
    (call,) = pending(task)
    assert (call["toolName"], call["input"]) == (
        "send_email",
        {"to": "ann@example.com"},
    )
    assert call["token"].startswith("v1.")

    done = await send(
        client,
        verdicts(
            task.id,
            {
                "approvalId": call["approvalId"],
                "approved": True,
                "token": call["token"],
            },
        ),
    )
    assert done.status.state == STATE.TASK_STATE_COMPLETED
    assert artifact_text(done) == answer_text("sent")
    assert effects(site).count("send_email:ann@example.com") >= 1
    listed = await client.list_tasks(a2a.ListTasksRequest(context_id=task.id))
    assert [t.id for t in listed.tasks] == [task.id]
    assert listed.tasks[0].status.state == STATE.TASK_STATE_COMPLETED


def expired_token(site: LiveSite, token: str) -> str:
    """``token`` signed again by the site's signer as if a day and more ago."""
    return str(
        site.script(
            f"""
            import base64, time
            from deuz_django.conf import deuz_settings
            from deuz_django.core.durable import create_approval_signer
            body = {token!r}.split(".")[1]
            payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            payload.pop("issuedAt")
            run_id = payload.pop("runId")
            class Past:
                def now(self):
                    return (time.time() - 25 * 3600) * 1000
            signer = create_approval_signer(
                secret=deuz_settings.APPROVAL_SECRET, clock=Past()
            )
            print(json.dumps(signer.sign(payload, run_id)))
            """
        )
    )


async def test_a_forged_or_expired_token_approves_nothing(
    site: LiveSite, server: Daphne, clients: list[httpx.AsyncClient]
) -> None:
    client = await connect(clients, server, "asker", api_token(site, "bo"))
    task = await send(client, user_text("Mail Ann."))
    (call,) = pending(task)
    head, body, mac = call["token"].split(".")
    forged = f"{head}.{body}.{'A' * len(mac)}"
    for token, problem in (
        (forged, "forged"),
        (expired_token(site, call["token"]), "expired"),
    ):
        answer = verdicts(
            task.id,
            {"approvalId": call["approvalId"], "approved": True, "token": token},
        )
        with pytest.raises(InvalidParamsError, match=problem):
            await send(client, answer)
    still = await client.get_task(a2a.GetTaskRequest(id=task.id))
    assert still.status.state == STATE.TASK_STATE_INPUT_REQUIRED
    assert [p["approvalId"] for p in pending(still)] == [call["approvalId"]]


async def test_another_users_task_is_not_found(
    site: LiveSite, server: Daphne, ann: str, clients: list[httpx.AsyncClient]
) -> None:
    owner = await connect(clients, server, "asker", ann)
    task = await send(owner, user_text("Mail Ann."))
    (call,) = pending(task)
    other = await connect(
        clients, server, "asker", api_token(site, "cy"), streaming=True
    )
    with pytest.raises(TaskNotFoundError):
        await other.get_task(a2a.GetTaskRequest(id=task.id))
    with pytest.raises(TaskNotFoundError):
        await other.cancel_task(a2a.CancelTaskRequest(id=task.id))
    with pytest.raises(TaskNotFoundError):
        async for _event in other.subscribe(a2a.SubscribeToTaskRequest(id=task.id)):
            pass
    answer = verdicts(
        task.id,
        {"approvalId": call["approvalId"], "approved": True, "token": call["token"]},
    )
    with pytest.raises(TaskNotFoundError):
        async for _event in other.send_message(answer):
            pass
    listed = await other.list_tasks(a2a.ListTasksRequest())
    assert task.id not in [t.id for t in listed.tasks]
    mine = await owner.get_task(a2a.GetTaskRequest(id=task.id))
    assert mine.status.state == STATE.TASK_STATE_INPUT_REQUIRED


async def test_the_answer_works_after_the_server_was_killed_between_ask_and_answer(
    site: LiveSite, clients: list[httpx.AsyncClient]
) -> None:
    token = api_token(site, "di")
    first = site.daphne()
    client = await connect(clients, first, "asker", token)
    task = await send(client, user_text("Mail Ann."))
    (call,) = pending(task)
    first.kill()

    second = site.daphne()
    client = await connect(clients, second, "asker", token)
    before = effects(site).count("send_email:ann@example.com")
    done = await send(
        client,
        verdicts(
            task.id,
            {
                "approvalId": call["approvalId"],
                "approved": True,
                "token": call["token"],
            },
        ),
    )
    assert done.status.state == STATE.TASK_STATE_COMPLETED
    assert artifact_text(done) == answer_text("sent")
    assert effects(site).count("send_email:ann@example.com") == before + 1


async def test_a_subscribe_mid_stream_misses_and_repeats_nothing(
    site: LiveSite, server: Daphne, clients: list[httpx.AsyncClient]
) -> None:
    client = await connect(
        clients, server, "streamer", api_token(site, "ed"), streaming=True
    )
    seen, task_id = "", ""
    stream = client.send_message(user_text("Count."))
    async for event in stream:
        if event.HasField("task"):
            task_id = event.task.id
        elif event.HasField("artifact_update"):
            seen += "".join(p.text for p in event.artifact_update.artifact.parts)
            if len(seen) > len(answer_text("w")) // 3:
                break  # the connection drops mid-answer
    await stream.aclose()
    assert task_id
    assert seen

    text, states = "", []
    async for event in client.subscribe(a2a.SubscribeToTaskRequest(id=task_id)):
        if event.HasField("task"):
            text = artifact_text(event.task)
            assert text.startswith(seen)
        elif event.HasField("artifact_update"):
            assert event.artifact_update.append
            text += "".join(p.text for p in event.artifact_update.artifact.parts)
        elif event.HasField("status_update"):
            states.append(event.status_update.status.state)
    assert text == answer_text("w")
    assert states[-1] == STATE.TASK_STATE_COMPLETED


async def test_a_canceled_task_is_canceled_and_takes_no_subscriber(
    site: LiveSite, server: Daphne, clients: list[httpx.AsyncClient]
) -> None:
    token = api_token(site, "fay")
    client = await connect(clients, server, "asker", token)
    task = await send(client, user_text("Mail Ann."))
    canceled = await client.cancel_task(a2a.CancelTaskRequest(id=task.id))
    assert canceled.status.state == STATE.TASK_STATE_CANCELED
    streaming = await connect(clients, server, "asker", token, streaming=True)
    with pytest.raises(UnsupportedOperationError, match="over"):
        async for _event in streaming.subscribe(a2a.SubscribeToTaskRequest(id=task.id)):
            pass


async def test_return_immediately_answers_before_the_run_settles(
    site: LiveSite, server: Daphne, clients: list[httpx.AsyncClient]
) -> None:
    client = await connect(clients, server, "streamer", api_token(site, "gus"))
    request = user_text("Count.")
    request.configuration.return_immediately = True
    task = await send(client, request)
    assert task.status.state in (STATE.TASK_STATE_SUBMITTED, STATE.TASK_STATE_WORKING)

    async def completed() -> bool:
        found = await client.get_task(a2a.GetTaskRequest(id=task.id))
        return found.status.state == STATE.TASK_STATE_COMPLETED

    for _ in range(400):
        if await completed():
            break
        await asyncio.sleep(0.05)
    assert await completed()


async def test_a_context_carries_the_conversation_into_its_next_task(
    site: LiveSite, server: Daphne, clients: list[httpx.AsyncClient]
) -> None:
    client = await connect(clients, server, "scripted", api_token(site, "hal"))
    first_request = user_text("Echo hi.")
    first_request.message.context_id = "chat-7"
    first = await send(client, first_request)
    assert first.status.state == STATE.TASK_STATE_COMPLETED
    assert first.context_id == "chat-7"

    second_request = user_text("And again.")
    second_request.message.context_id = "chat-7"
    second = await send(client, second_request)
    assert second.id != first.id
    assert second.context_id == "chat-7"
    said = [p.text for m in second.history for p in m.parts]
    assert said[0] == "Echo hi."
    assert "And again." in said
    listed = await client.list_tasks(a2a.ListTasksRequest(context_id="chat-7"))
    assert [t.id for t in listed.tasks] == [second.id, first.id]


async def test_a_question_is_input_required_and_answered_like_every_answer(
    site: LiveSite, server: Daphne, clients: list[httpx.AsyncClient]
) -> None:
    token = api_token(site, "ida")
    client = await connect(clients, server, "questioner", token)
    task = await send(client, user_text("Refund A-1."))
    assert task.status.state == STATE.TASK_STATE_INPUT_REQUIRED
    (ask,) = pending(task)
    assert ask["kind"] == "question"
    assert ask["question"]["choices"] == ["card", "store credit"]
    assert "deadline" in ask
    done = await send(
        client,
        verdicts(
            task.id,
            {
                "approvalId": ask["approvalId"],
                "approved": True,
                "token": ask["token"],
                "answer": "card",
            },
        ),
    )
    assert done.status.state == STATE.TASK_STATE_COMPLETED
    assert artifact_text(done) == "Answer: card"

    form = await connect(clients, server, "form_asker", token)
    task = await send(form, user_text("Refund A-1."))
    (ask,) = pending(task)
    wrong = {"approvalId": ask["approvalId"], "approved": True, "token": ask["token"]}
    with pytest.raises(InvalidParamsError, match="amount"):
        await send(form, verdicts(task.id, {**wrong, "answer": {"amount": 0}}))
    still = await form.get_task(a2a.GetTaskRequest(id=task.id))
    assert still.status.state == STATE.TASK_STATE_INPUT_REQUIRED


async def test_a_streamed_answer_streams_the_leg_it_starts(
    site: LiveSite, server: Daphne, clients: list[httpx.AsyncClient]
) -> None:
    client = await connect(
        clients, server, "asker", api_token(site, "jo"), streaming=True
    )
    events = [e async for e in client.send_message(user_text("Mail Ann."))]
    assert events[0].HasField("task")
    last = events[-1].status_update.status
    assert last.state == STATE.TASK_STATE_INPUT_REQUIRED
    (call,) = [
        p
        for part in last.message.parts
        if part.HasField("data")
        for p in json_format.MessageToDict(part.data)["pendingApprovals"]
    ]
    answer = verdicts(
        events[0].task.id,
        {"approvalId": call["approvalId"], "approved": True, "token": call["token"]},
    )
    text, states = "", []
    async for event in client.send_message(answer):
        if event.HasField("artifact_update"):
            text += "".join(p.text for p in event.artifact_update.artifact.parts)
        elif event.HasField("status_update"):
            states.append(event.status_update.status.state)
    assert text == answer_text("sent")
    assert states[0] == STATE.TASK_STATE_WORKING
    assert states[-1] == STATE.TASK_STATE_COMPLETED
