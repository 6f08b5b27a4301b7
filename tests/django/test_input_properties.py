"""Properties of untrusted input (hypothesis): whatever JSON a client sends — to any
WebSocket frame type or REST body — there is no 5xx, no socket closure (frames stay under
the documented size limit), and no approval is recorded without a valid token."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_django.models import Approval, ApprovalStatus
from deuz_django.routing import websocket_urlpatterns
from tests.api.support import API, client, started

NASTY_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(["\x00", "\ud800", "\udfff", "\u2028", '"', "\\"]),
    ),
    max_size=30,
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    NASTY_TEXT,
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(NASTY_TEXT, children, max_size=4),
    ),
    max_leaves=12,
)
FIELDS = [
    "agent",
    "text",
    "messages",
    "runId",
    "title",
    "lastSeq",
    "approvalId",
    "approved",
    "reason",
    "token",
    "verdicts",
    "resume",
    "denyRemaining",
    "step",
    "withTurn",
    "edit",
    "forkRunId",
    "system",
    "inputId",
]


def bodies(known: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Objects built from the API's own field names (some set to sensible values, so
    the fuzzer reaches past the first check), and any JSON at all."""
    sensible = st.sampled_from(list(known.values())) if known else st.nothing()
    field_value = st.one_of(JSON, sensible)
    return st.one_of(
        JSON,
        st.dictionaries(st.sampled_from(FIELDS), field_value, max_size=6),
        st.builds(
            lambda extra, verdict: {"verdicts": [verdict], **extra},
            st.dictionaries(st.sampled_from(FIELDS), field_value, max_size=2),
            st.dictionaries(st.sampled_from(FIELDS), field_value, max_size=4),
        ),
    )


EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def gated_run(make_user: Any) -> Any:
    owner = make_user("ann")
    return owner, started(owner)


def no_approval_without_a_token() -> None:
    assert not Approval.objects.filter(status=ApprovalStatus.APPROVED).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "endpoint", ["runs/", "verdicts/", "resume/", "fork/", "replay/", "inputs/"]
)
@EXAMPLES
@given(data=st.data())
def test_no_rest_body_yields_a_server_error(
    gated_run: Any, endpoint: str, data: st.DataObject
) -> None:
    owner, run = gated_run
    body = data.draw(
        bodies(
            {
                "agent": "gated",
                "runId": run.run_id,
                "approvalId": "e1",
                "approved": True,
                "text": "hi",
                "step": 0,
                "withTurn": True,
                "edit": {"toolCallId": "e1", "input": {"to": "bob@example.com"}},
            }
        )
    )
    path = "runs/" if endpoint == "runs/" else f"runs/{run.run_id}/{endpoint}"
    response = client(owner).post(
        f"{API}/{path}", data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code < 500, response.content
    no_approval_without_a_token()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "frame_type",
    [
        "start",
        "subscribe",
        "unsubscribe",
        "approval-response",
        "cancel",
        "fork",
        "input",
        "other",
    ],
)
@EXAMPLES
@given(data=st.data())
def test_no_frame_closes_the_socket(
    gated_run: Any, frame_type: str, data: st.DataObject
) -> None:
    owner, run = gated_run
    fields = data.draw(
        bodies(
            {
                # Never a registered agent, nor a run a fork frame may fork: a started
                # leg would outlive the example.
                "agent": "unregistered",
                "runId": "no-such-run" if frame_type == "fork" else run.run_id,
                "approvalId": "e1",
                "approved": True,
            }
        )
    )
    frame = {**fields, "type": frame_type} if isinstance(fields, dict) else fields
    async_to_sync(answered_and_open)(owner, json.dumps(frame))
    no_approval_without_a_token()


async def answered_and_open(user: Any, text: str) -> None:
    ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/deuz/")
    ws.scope["user"] = user
    assert (await ws.connect())[0]
    try:
        await ws.send_to(text_data=text)
        await ws.send_to(text_data='{"type": "unsubscribe", "runId": "probe"}')
        # Whatever the frame got (an error, a replay), the socket stays open: every
        # output until it falls quiet is a message, never a close.
        answers = []
        while not await ws.receive_nothing(timeout=0.2):
            answers.append(await ws.receive_output(timeout=1))
        assert all(a["type"] == "websocket.send" for a in answers), answers
    finally:
        await ws.disconnect()
