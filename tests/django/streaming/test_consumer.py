"""The consumer's protocol through channels' WebsocketCommunicator (no server)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from deuz_django.models import Approval, ApprovalStatus, Run, RunCall
from deuz_django.runs.continuing import ajoin_handed_off
from deuz_django.streaming.consumers import BURST
from deuz_django.streaming.frames import MAX_FRAME_BYTES
from tests.django.run_support import in_doubt

pytestmark = pytest.mark.django_db(transaction=True)
Connect = Callable[[Any], Awaitable[WebsocketCommunicator]]


async def until(
    ws: WebsocketCommunicator, predicate: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    seen = []
    while True:
        frame = await ws.receive_json_from(timeout=5)
        seen.append(frame)
        if predicate(frame):
            return seen


def is_final_done(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "done"


@pytest.fixture
async def ann(make_user: Any) -> Any:
    return await sync_to_async(make_user)("ann")


async def test_anonymous_sockets_are_closed_with_4401(ws_as: Connect) -> None:
    ws = await ws_as(AnonymousUser())
    output = await ws.receive_output(timeout=2)
    assert output == {
        "type": "websocket.close",
        "code": 4401,
        "reason": "authentication required",
    }


async def test_start_streams_every_part_in_seq_order_then_done(
    ws_as: Connect, ann: Any
) -> None:
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "scripted", "text": "hi"})
    frames = await until(ws, is_final_done)
    started = frames[0]
    assert started["type"] == "started"
    parts = [f for f in frames if "part" in f]
    assert [f["seq"] for f in parts] == list(range(len(parts)))
    assert parts[0]["part"] == {"type": "start", "messageId": started["runId"]}
    assert [p["part"]["type"] for p in parts][-2:] == ["step-finish", "finish"]
    assert frames[-1] == {"type": "done", "runId": started["runId"], "seq": len(parts)}


async def test_subscribe_replays_only_what_follows_last_seq(
    ws_as: Connect, ann: Any
) -> None:
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "scripted", "text": "hi"})
    first = await until(ws, is_final_done)
    run_id = first[0]["runId"]
    again = await ws_as(ann)
    await again.send_json_to({"type": "subscribe", "runId": run_id, "lastSeq": 10})
    replay = await until(again, is_final_done)
    assert (
        replay[0] == {"type": "subscribed", "runId": run_id, "status": "completed"}
        or replay[0]["seq"] == 11
    )
    seqs = [f["seq"] for f in replay if "seq" in f]
    assert seqs == list(range(11, first[-1]["seq"] + 1))


async def test_an_approval_answered_on_the_socket_resumes_the_run(
    ws_as: Connect, ann: Any, effects: Any
) -> None:
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "asker", "text": "email ann"})
    frames = await until(ws, is_final_done)
    request = next(
        f["part"]
        for f in frames
        if f.get("part", {}).get("type") == "tool-approval-request"
    )
    run_id = frames[0]["runId"]
    await ws.send_json_to(
        {
            "type": "approval-response",
            "runId": run_id,
            "approvalId": request["approvalId"],
            "approved": True,
            "token": request["token"],
        }
    )
    later = await until(ws, is_final_done)
    recorded = next(f for f in later if f.get("type") == "approval-recorded")
    assert recorded == {
        "type": "approval-recorded",
        "runId": run_id,
        "approvalId": "m1",
        "status": "approved",
        "resuming": True,
    }
    assert any(f.get("part", {}).get("type") == "tool-result" for f in later)
    assert effects() == ["send_email:ann@example.com"]


async def test_a_forged_token_is_refused_and_nothing_is_recorded(
    ws_as: Connect, ann: Any
) -> None:
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "asker", "text": "email ann"})
    frames = await until(ws, is_final_done)
    run_id = frames[0]["runId"]
    await ws.send_json_to(
        {
            "type": "approval-response",
            "runId": run_id,
            "approvalId": "m1",
            "approved": True,
            "token": "v1.e30.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        }
    )
    error = await ws.receive_json_from(timeout=5)
    assert error["type"] == "error"
    assert error["code"] == "invalid_verdict"
    assert "v1.e30" not in error["message"]  # a token is never echoed
    status = await Approval.objects.values_list("status", flat=True).aget(
        approval_id="m1"
    )
    assert status == ApprovalStatus.PENDING


async def test_another_users_run_is_not_found(
    ws_as: Connect, ann: Any, make_user: Any
) -> None:
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "scripted", "text": "hi"})
    run_id = (await until(ws, is_final_done))[0]["runId"]
    eve = await ws_as(await sync_to_async(make_user)("eve"))
    for frame in (
        {"type": "subscribe", "runId": run_id},
        {"type": "cancel", "runId": run_id},
        {
            "type": "approval-response",
            "runId": run_id,
            "approvalId": "x",
            "approved": False,
        },
    ):
        await eve.send_json_to(frame)
        answer = await eve.receive_json_from(timeout=5)
        assert (answer["code"], answer["message"]) == (
            "not_found",
            f"No run '{run_id}'.",
        )


@pytest.mark.parametrize(
    ("frame", "code", "words"),
    [
        ("{not json", "bad_json", "not valid JSON"),
        ("[1, 2]", "bad_frame", "JSON object"),
        ('{"type": "dance"}', "unknown_type", "unknown frame type 'dance'"),
        ('{"type": "start"}', "missing_field", "agent: This field is required."),
        (
            '{"type": "start", "agent": "scripted"}',
            "missing_field",
            "messages: Give messages or text.",
        ),
        (
            '{"type": "start", "agent": 5, "text": "x"}',
            "invalid_field",
            "agent: Not a valid string.",
        ),
        (
            '{"type": "start", "agent": "nope", "text": "x"}',
            "unknown_agent",
            'agent: Unknown agent "nope"',
        ),
        (
            '{"type": "start", "agent": "scripted", "messages": [{"role": "robot"}]}',
            "invalid_field",
            "messages[0].role",
        ),
        (
            '{"type": "subscribe", "runId": "../etc"}',
            "invalid_field",
            "runId: Use only letters, digits, '_' and '-'",
        ),
        (
            '{"type": "subscribe", "runId": "r", "lastSeq": "3"}',
            "invalid_field",
            "lastSeq: Must be an integer.",
        ),
        (
            '{"type": "approval-response", "runId": "r", "approvalId": "a", "approved": "yes"}',
            "invalid_field",
            "approved: Must be a boolean (true or false).",
        ),
    ],
)
async def test_bad_frames_get_an_error_naming_the_problem_and_the_socket_stays_open(
    ws_as: Connect, ann: Any, frame: str, code: str, words: str
) -> None:
    ws = await ws_as(ann)
    await ws.send_to(text_data=frame)
    error = await ws.receive_json_from(timeout=5)
    assert error["type"] == "error"
    assert error["code"] == code
    assert words in error["message"]
    await ws.send_to(text_data='{"type": "subscribe", "runId": "missing"}')
    assert (await ws.receive_json_from(timeout=5))["code"] == "not_found"  # still open


async def test_oversized_and_binary_frames_are_refused(
    ws_as: Connect, ann: Any
) -> None:
    ws = await ws_as(ann)
    await ws.send_to(
        text_data=json.dumps(
            {"type": "start", "agent": "scripted", "text": "x" * MAX_FRAME_BYTES}
        )
    )
    assert (await ws.receive_json_from(timeout=5))["code"] == "too_large"
    await ws.send_to(bytes_data=b"\x00\x01")
    assert (await ws.receive_json_from(timeout=5))["code"] == "bad_frame"


async def test_a_flood_is_throttled_not_crashed(ws_as: Connect, ann: Any) -> None:
    ws = await ws_as(ann)
    for _ in range(BURST + 60):
        await ws.send_to(text_data='{"type": "unsubscribe", "runId": "r"}')
    answer = await ws.receive_json_from(timeout=5)
    assert answer["code"] == "rate_limited"
    assert await ws.receive_nothing(timeout=0.2)
    assert await sync_to_async(Run.objects.count)() == 0


async def test_cancel_aborts_the_running_leg(
    ws_as: Connect, ann: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEUZ_TEST_CHUNKS", "200")
    monkeypatch.setenv("DEUZ_TEST_CHUNK_DELAY", "0.02")
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "streamer", "text": "go"})
    frames = await until(ws, lambda f: f.get("part", {}).get("type") == "text-delta")
    run_id = frames[0]["runId"]
    await ws.send_json_to({"type": "cancel", "runId": run_id})
    rest = await until(ws, is_final_done)
    finish = [f["part"] for f in rest if f.get("part", {}).get("type") == "finish"]
    assert finish
    assert finish[-1]["finishReason"] == "aborted"
    texts = [f for f in frames + rest if f.get("part", {}).get("type") == "text-delta"]
    assert len(texts) < 200


@pytest.mark.parametrize(
    ("run_id", "valid"),
    [("abc-DEF_123", True), ("a" * 100, True), ("a" * 101, False), ("a.b", False)],
)
async def test_the_socket_and_the_api_take_the_same_run_ids(
    ws_as: Connect, ann: Any, run_id: str, valid: bool
) -> None:
    from rest_framework.test import APIClient

    ws = await ws_as(ann)
    await ws.send_json_to(
        {"type": "start", "agent": "scripted", "text": "hi", "runId": run_id}
    )
    answer = await ws.receive_json_from(timeout=5)
    api = APIClient()
    api.force_authenticate(ann)
    rest_id = "R" + run_id[1:]  # another run, the same shape
    response = await sync_to_async(api.post)(
        "/api/deuz/runs/",
        {"agent": "scripted", "text": "hi", "runId": rest_id},
        format="json",
    )
    await ajoin_handed_off()  # the REST run's first leg, handed to this event loop
    if valid:
        assert answer["type"] == "started"
        assert response.status_code == 201
    else:
        assert (answer["code"], answer["message"].split(":")[0]) == (
            "invalid_field",
            "runId",
        )
        assert response.status_code == 400
        assert response.json()["errors"][0]["field"] == "runId"


async def test_the_socket_answers_with_the_codes_the_api_uses(
    ws_as: Connect, ann: Any
) -> None:
    """A refused decision and a replayed one: the exception's code, as over REST."""
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "gated", "text": "refund"})
    run_id = (await until(ws, is_final_done))[0]["runId"]
    refund = await Approval.objects.aget(run__run_id=run_id, approval_id="r1")
    base = {"type": "approval-response", "runId": run_id}
    await ws.send_json_to(
        {**base, "approvalId": "r1", "approved": True, "token": refund.token}
    )
    forbidden = await ws.receive_json_from(timeout=5)
    assert forbidden["code"] == "not_permitted"
    await ws.send_json_to({**base, "approvalId": "e1", "approved": False})
    assert (await ws.receive_json_from(timeout=5))["type"] == "approval-recorded"
    await ws.send_json_to({**base, "approvalId": "e1", "approved": False})
    replay = await ws.receive_json_from(timeout=5)
    assert (replay["code"], replay["message"]) == (
        "approval_already_decided",
        "Approval e1 was already denied.",
    )


async def test_an_approval_response_with_a_result_records_that_the_call_happened(
    ws_as: Connect, ann: Any, effects: Any
) -> None:
    run = await sync_to_async(in_doubt)(ann)
    asked = await Approval.objects.aget(run=run, approval_id="s1")
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "subscribe", "runId": run.run_id, "lastSeq": -1})
    await ws.send_json_to(
        {
            "type": "approval-response",
            "runId": run.run_id,
            "approvalId": "s1",
            "approved": True,
            "token": asked.token,
            "result": {"done": "by hand"},
        }
    )
    frames = await until(ws, lambda f: f.get("type") == "approval-recorded")
    assert frames[-1]["status"] == "approved"
    results = await until(
        ws,
        lambda f: (
            f.get("part", {}).get("type") == "tool-result"
            and f["part"]["toolCallId"] == "s1"
        ),
    )
    assert results[-1]["part"]["output"] == {"done": "by hand"}
    assert "slow:1:start" not in effects()


@pytest.mark.parametrize(
    ("change", "code", "problem"),
    [
        ({"result": "\u0000"}, "invalid_field", "result"),
        ({"result": "done", "approved": False}, "invalid_verdict", "records a result"),
    ],
)
async def test_a_bad_result_gets_an_error_frame_and_nothing_is_recorded(
    ws_as: Connect, ann: Any, change: dict[str, Any], code: str, problem: str
) -> None:
    run = await sync_to_async(in_doubt)(ann)
    asked = await Approval.objects.aget(run=run, approval_id="s1")
    ws = await ws_as(ann)
    frame = {
        "type": "approval-response",
        "runId": run.run_id,
        "approvalId": "s1",
        "approved": True,
        "token": asked.token,
    }
    await ws.send_json_to({**frame, **change})
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("error", code)
    assert problem in error["message"]
    await asked.arefresh_from_db()
    assert asked.status == ApprovalStatus.PENDING
    assert await RunCall.objects.filter(step__run=run, finished=False).acount() == 1


async def test_a_leg_that_cannot_start_tells_the_client_and_fails_the_run(
    ws_as: Connect, ann: Any, settings: Any
) -> None:
    """No approval secret (a server that skipped the system checks): the client gets
    the error and the leg's end, never a silent wait, and the run keeps the reason."""
    settings.DEUZ = {**settings.DEUZ, "APPROVAL_SECRET": None}
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "scripted", "text": "hi"})
    frames = await until(ws, is_final_done)
    assert frames[0]["type"] == "started"
    (error,) = [f["part"] for f in frames if f.get("part", {}).get("type") == "error"]
    assert "APPROVAL_SECRET" in error["message"]
    run = await Run.objects.aget(run_id=frames[0]["runId"])
    assert "APPROVAL_SECRET" in run.last_error  # failed: recovery leaves it alone
