"""The socket's ``input`` frame: steering a run from the chat."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from deuz_django.models import RunInput

from .test_consumer import is_final_done, until

pytestmark = pytest.mark.django_db(transaction=True)
Connect = Callable[[Any], Awaitable[WebsocketCommunicator]]


@pytest.fixture
async def ann(make_user: Any) -> Any:
    return await sync_to_async(make_user)("ann")


def part_type(frame: dict[str, Any]) -> str:
    return str(frame.get("part", {}).get("type", ""))


def text_of(frames: list[dict[str, Any]]) -> str:
    return "".join(f["part"]["text"] for f in frames if part_type(f) == "text-delta")


async def test_input_sent_while_a_tool_runs_is_delivered_after_it(
    ws_as: Connect, ann: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = tmp_path / "gate"
    monkeypatch.setenv("DEUZ_TEST_GATE", str(gate))
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "pauser", "text": "Check."})
    frames = await until(ws, lambda f: part_type(f) == "tool-call")
    run_id = frames[0]["runId"]
    await ws.send_json_to(
        {"type": "input", "runId": run_id, "text": "Oslo too.", "inputId": "m-1"}
    )
    queued = await until(ws, lambda f: f.get("type") == "input-queued")
    assert queued[-1] == {
        "type": "input-queued",
        "runId": run_id,
        "inputId": "m-1",
        "seq": 1,
    }
    gate.touch()
    rest = await until(ws, is_final_done)
    kinds = [part_type(f) for f in rest if "part" in f]
    assert kinds.index("tool-result") < kinds.index("data-input-delivered")
    delivered = next(f["part"] for f in rest if part_type(f) == "data-input-delivered")
    assert delivered["payload"]["inputId"] == "m-1"
    assert delivered["payload"]["text"] == "Oslo too."
    assert delivered["payload"]["stepIndex"] == 1
    assert text_of(rest) == "You said: Oslo too."
    row = await RunInput.objects.aget(run__run_id=run_id)
    assert row.delivered_at_step == 1


async def test_an_interrupting_agent_answers_the_input_at_once(
    ws_as: Connect, ann: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEUZ_TEST_CHUNK_SECONDS", "0.05")
    ws = await ws_as(ann)
    await ws.send_json_to(
        {"type": "start", "agent": "echoer_interrupt", "text": "A long story."}
    )
    frames = await until(ws, lambda f: part_type(f) == "text-delta")
    run_id = frames[0]["runId"]
    await ws.send_json_to({"type": "input", "runId": run_id, "text": "Short."})
    rest = await until(ws, is_final_done)
    starts = [f["part"]["step"] for f in frames + rest if part_type(f) == "step-start"]
    assert starts == [0, 0]  # the answer in progress was discarded
    after = rest[[part_type(f) for f in rest].index("data-input-delivered") :]
    assert text_of(after) == "You said: Short."


async def test_a_finished_run_refuses_input_with_the_apis_code(
    ws_as: Connect, ann: Any
) -> None:
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "echoer", "text": "Hi."})
    run_id = (await until(ws, is_final_done))[0]["runId"]
    await ws.send_json_to({"type": "input", "runId": run_id, "text": "More."})
    error = await until(ws, lambda f: f.get("type") == "error")
    assert error[-1] == {
        "type": "error",
        "code": "run_not_steerable",
        "message": f"Run '{run_id}' has completed; start a new one or fork it.",
        "frame": "input",
    }


@pytest.mark.parametrize(
    ("frame", "code", "words"),
    [
        ({"type": "input", "runId": "r"}, "missing_field", "text: This field is"),
        ({"type": "input", "runId": "r", "text": " "}, "invalid_field", "text: "),
        ({"type": "input", "runId": "r", "text": 3}, "invalid_field", "text: "),
        ({"type": "input", "runId": "nope", "text": "Hi"}, "not_found", "No run"),
    ],
)
async def test_a_bad_input_frame_gets_an_error_and_the_socket_stays_open(
    ws_as: Connect, ann: Any, frame: dict[str, Any], code: str, words: str
) -> None:
    ws = await ws_as(ann)
    await ws.send_json_to(frame)
    error = await ws.receive_json_from(timeout=5)
    assert (error["code"], error["frame"]) == (code, "input")
    assert words in error["message"]
    await ws.send_json_to({"type": "subscribe", "runId": "missing"})
    assert (await ws.receive_json_from(timeout=5))["code"] == "not_found"
