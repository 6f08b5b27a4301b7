"""Every kind of call a run waits on, as an AG-UI interrupt answered through the
official client: a question (``input_required``, its choices the schema of the
answer, its deadline the ``expiresAt``), a client tool's call (its result the
payload), and a gated call cancelled (a denial the model is told about)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.live_site import LiveSite

from .conftest import token_for
from .node_client import answer, of_type, resume, start, text_of

pytestmark = pytest.mark.processes


def test_a_question_is_an_input_required_interrupt_answered_with_its_choice(
    site: LiveSite,
) -> None:
    server = site.daphne()
    token = token_for(site, "ann")
    thread, first = start(server, token, "questioner")
    [interrupt] = first["pendingInterrupts"]
    assert interrupt["reason"] == "input_required"
    assert interrupt["message"] == "Refund order A-1 to the card or as store credit?"
    answer_schema = interrupt["responseSchema"]["properties"]["answer"]
    assert answer_schema == {"enum": ["card", "store credit"]}
    # The question's one-hour deadline comes before APPROVAL_MAX_AGE (a day).
    expires = datetime.fromisoformat(interrupt["expiresAt"])
    assert expires - datetime.now(expires.tzinfo) < timedelta(hours=1, minutes=1)

    wrong = resume(
        server, token, thread, answer(interrupt, answer="cash"), agent="questioner"
    )
    assert "400" in wrong["error"]
    answered = resume(
        server, token, thread, answer(interrupt, answer="card"), agent="questioner"
    )
    assert answered["error"] is None, answered
    [result] = of_type(answered, "TOOL_CALL_RESULT")
    assert result["toolCallId"] == "q1"
    assert text_of(answered) == "Answer: card"


def test_a_client_tools_call_is_answered_with_its_result(site: LiveSite) -> None:
    server = site.daphne()
    token = token_for(site, "ann")
    thread, first = start(server, token, "client_caller")
    [interrupt] = first["pendingInterrupts"]
    assert interrupt["reason"] == "input_required"
    assert interrupt["responseSchema"]["required"] == ["result"]
    done = resume(
        server, token, thread, answer(interrupt, result="teal"), agent="client_caller"
    )
    assert done["error"] is None, done
    assert text_of(done) == "Result: teal"


def test_a_cancelled_interrupt_denies_the_call(site: LiveSite, effects: Path) -> None:
    server = site.daphne()
    token = token_for(site, "ann")
    thread, first = start(server, token)
    [interrupt] = first["pendingInterrupts"]
    cancelled = {"interruptId": interrupt["id"], "status": "cancelled"}
    done = resume(server, token, thread, cancelled)
    assert done["error"] is None, done
    results = of_type(done, "TOOL_CALL_RESULT")
    assert len(results) == 1, done["events"]
    [result] = results
    assert result["toolCallId"] == "e1"
    assert "Cancelled through AG-UI" in result["content"]
    assert of_type(done, "RUN_FINISHED")[0]["outcome"]["type"] == "success"
    assert not effects.exists()
