"""The AG-UI endpoint driven by the official client (``@ag-ui/client`` on Node) against
a real daphne: a run suspended on an approval and approved through the protocol, with
its signed token; forged and expired answers refused; a server SIGKILLed between the
interrupt and the resume; a stream cut mid-run and rejoined; another user's thread."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live_site import LiveSite

from .conftest import token_for
from .node_client import (
    answer,
    drive,
    endpoint,
    of_type,
    resume,
    start,
    text_of,
    types,
)

pytestmark = pytest.mark.processes


def test_a_run_suspended_on_an_approval_is_approved_through_the_protocol(
    site: LiveSite, effects: Path
) -> None:
    server = site.daphne()
    token = token_for(site, "ann")
    thread, first = start(server, token)
    assert first["error"] is None
    assert types(first)[0] == "RUN_STARTED"
    assert types(first)[-3:] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert text_of(first) == "asking 0 asking 1 asking 2 "
    [call] = of_type(first, "TOOL_CALL_START")
    assert call["toolCallId"] == "e1"
    assert call["toolCallName"] == "send_email"
    [interrupt] = first["pendingInterrupts"]
    assert interrupt["reason"] == "tool_call"
    assert interrupt["toolCallId"] == "e1"
    assert interrupt["responseSchema"]["required"] == ["approved"]
    assert interrupt["metadata"]["deuz"]["token"].startswith("v1.")
    assert interrupt["expiresAt"]
    [finished] = of_type(first, "RUN_FINISHED")
    assert finished["outcome"]["type"] == "interrupt"

    second = resume(server, token, thread, answer(interrupt, approved=True))
    assert second["error"] is None, second
    [result] = of_type(second, "TOOL_CALL_RESULT")
    assert result["toolCallId"] == "e1"
    assert result["content"] == "sent to ann@example.com"
    assert text_of(second) == "sent 0 sent 1 sent 2 "
    assert of_type(second, "RUN_FINISHED")[0]["outcome"]["type"] == "success"
    assert second["pendingInterrupts"] == []
    assert effects.read_text().splitlines() == ["send_email:ann@example.com"]
    assert site.run_column(thread, "status") == "completed"

    # The same resume again: nothing recorded, nothing run, the same events.
    again = resume(server, token, thread, answer(interrupt, approved=True), run="run-2")
    assert again["error"] is None
    assert again["events"][1:] == second["events"][1:]
    assert again["ids"] == second["ids"]
    assert effects.read_text().splitlines() == ["send_email:ann@example.com"]


def test_a_forged_token_is_refused_and_the_call_still_waits(
    site: LiveSite, effects: Path
) -> None:
    server = site.daphne()
    token = token_for(site, "ann")
    thread, first = start(server, token)
    [interrupt] = first["pendingInterrupts"]
    forged = answer(interrupt, approved=True)
    signed = forged["metadata"]["deuz"]["token"]
    forged["metadata"] = {"deuz": {"token": signed[:-4] + "AAAA"}}
    refused = resume(server, token, thread, forged)
    assert refused["error"] is not None
    assert "400" in refused["error"]
    unsigned = {**forged, "metadata": {}}
    assert "400" in resume(server, token, thread, unsigned)["error"]
    assert not effects.exists()
    assert site.run_column(thread, "status") == "suspended"
    # A payload the schema refuses is refused too, naming the field.
    wrong = resume(server, token, thread, answer(interrupt, approved="yes"))
    assert "400" in wrong["error"]
    # The genuine token still approves.
    assert (
        resume(server, token, thread, answer(interrupt, approved=True))["error"] is None
    )


def test_an_expired_interrupt_answered_is_a_run_error(
    site: LiveSite, effects: Path
) -> None:
    server = site.daphne()
    token = token_for(site, "ann")
    thread, first = start(server, token)
    [interrupt] = first["pendingInterrupts"]
    site.script(
        f"""
        from datetime import timedelta
        from django.utils import timezone
        from deuz_django.models import Approval
        Approval.objects.filter(run__run_id={thread!r}).update(
            created_at=timezone.now() - timedelta(days=2)
        )
        print("null")
        """
    )
    expired = resume(server, token, thread, answer(interrupt, approved=True))
    [error] = of_type(expired, "RUN_ERROR")
    assert error["code"] == "interrupt_expired"
    assert not effects.exists()


def test_another_users_thread_is_not_found(site: LiveSite, effects: Path) -> None:
    server = site.daphne()
    ann, bob = token_for(site, "ann"), token_for(site, "bob")
    thread, first = start(server, ann)
    [interrupt] = first["pendingInterrupts"]
    taken = resume(server, bob, thread, answer(interrupt, approved=True))
    assert "404" in taken["error"]
    rejoined = drive(
        url=endpoint(server), token=bob, threadId=thread, runId="x", lastEventId=0
    )
    assert "404" in rejoined["error"]
    assert not effects.exists()
    assert site.run_column(thread, "status") == "suspended"


def test_the_resume_works_on_a_server_started_after_the_first_was_killed(
    site: LiveSite, effects: Path
) -> None:
    first_server = site.daphne()
    token = token_for(site, "ann")
    thread, first = start(first_server, token)
    [interrupt] = first["pendingInterrupts"]
    first_server.kill()
    second_server = site.daphne()
    resumed = resume(second_server, token, thread, answer(interrupt, approved=True))
    assert resumed["error"] is None, resumed
    [result] = of_type(resumed, "TOOL_CALL_RESULT")
    assert result["toolCallId"] == "e1"
    assert of_type(resumed, "RUN_FINISHED")[0]["outcome"]["type"] == "success"
    assert effects.read_text().splitlines() == ["send_email:ann@example.com"]


def test_a_stream_cut_mid_run_is_rejoined_without_a_lost_or_repeated_event(
    site: LiveSite,
) -> None:
    site.env.update(DEUZ_TEST_CHUNKS="30", DEUZ_TEST_CHUNK_DELAY="0.03")
    server = site.daphne()
    token = token_for(site, "ann")
    thread, cut = start(server, token, cutAfter=8)
    assert cut["cut"]
    assert not of_type(cut, "RUN_FINISHED")
    last = cut["ids"][-1]
    rest = drive(
        url=endpoint(server),
        token=token,
        threadId=thread,
        runId="run-1",
        lastEventId=last,
    )
    assert rest["error"] is None, rest
    whole = drive(
        url=endpoint(server),
        token=token,
        threadId=thread,
        runId="run-1",
        lastEventId=-1,
    )
    assert cut["ids"] + rest["ids"] == whole["ids"]
    assert len(set(whole["ids"])) == len(whole["ids"])
    assert text_of(cut) + text_of(rest) == text_of(whole)
    assert text_of(whole) == "".join(f"asking {i} " for i in range(30))
    assert of_type(rest, "RUN_FINISHED") == of_type(whole, "RUN_FINISHED")
