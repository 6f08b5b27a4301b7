"""Bad input never yields a 500 or kills a socket: NUL characters and lone surrogates in
every string of every frame type and request body, integers too large for any journal or
page in every integer-like parameter, nesting bombs. Each gets a clear 400 or ``error``
frame naming the field, the socket stays open, and nothing is recorded."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from deuz_django.models import Approval, Run
from tests.api.support import API, approval, client, started

NUL, SURROGATE = "\x00", "\ud800"
BAD_TEXT = {"NUL": f"a{NUL}b", "lone surrogate": f"a{SURROGATE}b"}
HUGE = "9" * 5000  # past Python's int() limit of 4,300 digits
BOMB = "[" * 100_000 + "]" * 100_000


def raw_json(value: Any) -> str:
    """JSON text that may carry lone surrogates (as ``\\ud800`` escapes)."""
    return json.dumps(value)


# -- the WebSocket ---------------------------------------------------------------------------

Connect = Callable[[Any], Awaitable[WebsocketCommunicator]]


def frames_with_bad_text(run_id: str) -> list[tuple[dict[str, Any], str]]:
    """Every string field of every frame type, each with ``{text}`` to fill in."""
    start = {"type": "start", "agent": "gated", "text": "hi"}
    verdict = {
        "type": "approval-response",
        "runId": run_id,
        "approvalId": "e1",
        "approved": False,
    }
    return [
        ({**start, "agent": "{text}"}, "agent"),
        ({**start, "text": "{text}"}, "text"),
        ({**start, "runId": "{text}"}, "runId"),
        ({**start, "title": "{text}"}, "title"),
        (
            {
                "type": "start",
                "agent": "gated",
                "messages": [{"role": "user", "content": "{text}"}],
            },
            "messages[0].content",
        ),
        ({"type": "subscribe", "runId": "{text}"}, "runId"),
        ({"type": "unsubscribe", "runId": "{text}"}, "runId"),
        ({"type": "cancel", "runId": "{text}"}, "runId"),
        ({**verdict, "runId": "{text}"}, "runId"),
        ({**verdict, "approvalId": "{text}"}, "approvalId"),
        ({**verdict, "reason": "{text}"}, "reason"),
        ({**verdict, "approved": True, "token": "{text}"}, "token"),
    ]


def fill(frame: dict[str, Any], text: str) -> dict[str, Any]:
    def put(value: Any) -> Any:
        if value == "{text}":
            return text
        if isinstance(value, dict):
            return {k: put(v) for k, v in value.items()}
        if isinstance(value, list):
            return [put(v) for v in value]
        return value

    return dict(put(frame))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("bad", BAD_TEXT)
async def test_bad_text_in_any_frame_gets_an_error_naming_the_field(
    ws_as: Connect, make_user: Any, bad: str
) -> None:
    ann = await sync_to_async(make_user)("ann")
    run = await sync_to_async(started)(ann)
    ws = await ws_as(ann)
    for frame, field in frames_with_bad_text(run.run_id):
        await ws.send_to(text_data=raw_json(fill(frame, BAD_TEXT[bad])))
        error = await ws.receive_json_from(timeout=5)
        assert error["type"] == "error", (frame, error)
        assert error["code"] == "invalid_field", (frame, error)
        assert error["message"].startswith(f"{field}:"), (frame, error)
        assert NUL not in error["message"]
        assert SURROGATE not in error["message"]
    assert await Run.objects.acount() == 1
    statuses = {a.status async for a in Approval.objects.all()}
    assert statuses == {"pending"}
    await ws.send_json_to({"type": "subscribe", "runId": run.run_id})
    assert (await ws.receive_json_from(timeout=5))["runId"] == run.run_id  # still open


@pytest.mark.django_db(transaction=True)
async def test_huge_numbers_and_nesting_bombs_in_frames_get_an_error(
    ws_as: Connect, make_user: Any
) -> None:
    ann = await sync_to_async(make_user)("ann")
    ws = await ws_as(ann)
    for text, code, words in [
        (f'{{"type": "subscribe", "runId": "r", "lastSeq": {HUGE}}}', "bad_json", ""),
        (
            '{"type": "subscribe", "runId": "r", "lastSeq": 1' + "0" * 30 + "}",
            "invalid_field",
            "lastSeq:",
        ),
        (BOMB, "bad_json", "nested too deeply"),
        ('{"type": "start", "agent": "gated", "text": 1e999}', "bad_json", "range"),
    ]:
        await ws.send_to(text_data=text)
        error = await ws.receive_json_from(timeout=5)
        assert (error["type"], error["code"]) == ("error", code)
        assert words in error["message"]
    await ws.send_to(text_data='{"type": "subscribe", "runId": "missing"}')
    assert (await ws.receive_json_from(timeout=5))["code"] == "not_found"


@pytest.mark.django_db(transaction=True)
async def test_a_title_over_200_characters_is_refused_on_the_socket_as_over_rest(
    ws_as: Connect, make_user: Any
) -> None:
    ann = await sync_to_async(make_user)("ann")
    ws = await ws_as(ann)
    await ws.send_json_to(
        {"type": "start", "agent": "gated", "text": "hi", "title": "t" * 201}
    )
    error = await ws.receive_json_from(timeout=5)
    assert (error["code"], error["message"].split(":")[0]) == ("invalid_field", "title")
    assert await Run.objects.acount() == 0


# -- REST ------------------------------------------------------------------------------------


def post_raw(user: Any, url: str, body: str) -> Any:
    return client(user).post(url, data=body, content_type="application/json")


@pytest.mark.django_db
@pytest.mark.parametrize("bad", BAD_TEXT)
def test_bad_text_in_any_body_gets_a_400_naming_the_field(
    make_user: Any, bad: str
) -> None:
    ann = make_user("ann")
    run = started(ann)
    text = BAD_TEXT[bad]
    start = {"agent": "gated", "text": "hi"}
    cases: list[tuple[str, Any, str]] = [
        ("runs/", {**start, "agent": text}, "agent"),
        ("runs/", {**start, "text": text}, "text"),
        ("runs/", {**start, "runId": text}, "runId"),
        ("runs/", {**start, "title": text}, "title"),
        (
            "runs/",
            {"agent": "gated", "messages": [{"role": "user", "content": text}]},
            "messages[0].content",
        ),
        (
            f"runs/{run.run_id}/verdicts/",
            {"verdicts": [{"approvalId": text, "approved": False}]},
            "verdicts[0].approvalId",
        ),
        (
            f"runs/{run.run_id}/verdicts/",
            {"verdicts": [{"approvalId": "e1", "approved": False, "reason": text}]},
            "verdicts[0].reason",
        ),
        (
            f"runs/{run.run_id}/verdicts/",
            {"verdicts": [{"approvalId": "e1", "approved": True, "token": text}]},
            "verdicts[0].token",
        ),
    ]
    for path, body, field in cases:
        response = post_raw(ann, f"{API}/{path}", raw_json(body))
        assert response.status_code == 400, (path, body, response.content)
        answer = response.json()
        fields = [
            f"verdicts[{e['index']}].{e['field']}" if "index" in e else e["field"]
            for e in answer["errors"]
        ]
        assert field in fields, (field, answer)
        assert NUL not in response.content.decode()
        assert "\\ud800" not in response.content.decode().lower()
    assert Run.objects.count() == 1
    assert set(run.approvals.values_list("status", flat=True)) == {"pending"}


@pytest.mark.django_db
def test_nul_in_a_path_or_a_query_is_a_clear_answer(make_user: Any) -> None:
    ann = make_user("ann")
    run = started(ann)
    api = client(ann)
    for path in ("runs/%00/", "runs/%00/messages/", "runs/a%00b/verdicts/"):
        response = (
            api.post(f"{API}/{path}", {"verdicts": []}, format="json")
            if "verdicts" in path
            else api.get(f"{API}/{path}")
        )
        assert response.status_code == 404, (path, response.content)
        assert response.json()["code"] == "not_found"
    for query in ("runs/?agent=%00", "approvals/?runId=%00", "approvals/?toolName=%00"):
        response = api.get(f"{API}/{query}")
        assert response.status_code == 400, (query, response.content)
        assert response.json()["errors"][0]["field"] in query
    session = Client()
    session.force_login(ann)
    stream = session.get(f"{API}/runs/%00/stream")
    assert stream.status_code == 404
    assert run.approvals.filter(status="pending").count() == 2


@pytest.mark.django_db
def test_huge_integers_in_every_integer_parameter_get_a_400_naming_it(
    make_user: Any,
) -> None:
    ann = make_user("ann")
    run = started(ann)
    api = client(ann)
    for query, field in [
        (f"runs/?page={HUGE}", "page"),
        (f"runs/?pageSize={HUGE}", "pageSize"),
        (f"approvals/?page={HUGE}", "page"),
        (f"runs/{run.run_id}/messages/?page={HUGE}", "page"),
        (f"runs/?page=1{'0' * 20}", "page"),
    ]:
        response = api.get(f"{API}/{query}")
        assert response.status_code == 400, (query, response.content)
        assert response.json()["errors"][0]["field"] == field
    session = Client()
    session.force_login(ann)
    stream = f"{API}/runs/{run.run_id}/stream"
    for response, field in [
        (session.get(stream, headers={"Last-Event-ID": HUGE}), "Last-Event-ID"),
        (session.get(f"{stream}?lastEventId={HUGE}"), "lastEventId"),
    ]:
        assert response.status_code == 400
        assert response.json()["errors"][0]["field"] == field


@pytest.mark.django_db
def test_a_nesting_bomb_body_is_a_400(make_user: Any) -> None:
    ann = make_user("ann")
    response = post_raw(ann, f"{API}/runs/", BOMB)
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_the_owner_may_deny_their_own_staff_only_call_both_ways(make_user: Any) -> None:
    """Denying through ``verdicts/`` and through ``resume {"denyRemaining": true}`` agree
    (docs/permissions.md: Who may do what): the owner may refuse any call on their own run."""
    ann = make_user("ann")
    run = started(ann)
    verdict = client(ann).post(
        f"{API}/runs/{run.run_id}/verdicts/",
        {"verdicts": [{"approvalId": "r1", "approved": False}], "resume": False},
        format="json",
    )
    assert verdict.status_code == 200
    assert approval(run, "r1").status == "denied"
    other = started(ann)
    resume = client(ann).post(
        f"{API}/runs/{other.run_id}/resume/", {"denyRemaining": True}, format="json"
    )
    assert resume.status_code == 202
    assert approval(other, "r1").status == "denied"
    refuse_approving = client(ann).post(
        f"{API}/runs/{other.run_id}/verdicts/",
        {"verdicts": [{"approvalId": "r1", "approved": True}]},
        format="json",
    )
    assert refuse_approving.status_code in (403, 409)


@pytest.mark.django_db
def test_stored_text_with_a_lone_surrogate_renders_escaped_not_as_a_500(
    make_user: Any,
) -> None:
    from deuz_django.core.durable.codec import encode_json
    from deuz_django.models import RunMessage

    ann = make_user("ann")
    run = started(ann)
    data = encode_json({"role": "assistant", "content": f"odd {SURROGATE} text"})
    RunMessage.objects.filter(run=run, index=0).update(data=data)
    response = client(ann).get(f"{API}/runs/{run.run_id}/messages/")
    assert response.status_code == 200
    assert "\\ud800" in response.content.decode()
    plain = client(ann).get(f"{API}/runs/{run.run_id}/")
    assert "\\u" not in plain.content.decode()  # everything else stays UTF-8
