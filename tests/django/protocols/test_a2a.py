"""The A2A endpoints in process: the card, refusals in A2A's error shape, task states
and the task list (the live tests drive whole runs through the SDK's client)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from a2a.types import a2a_pb2 as a2a
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from google.protobuf import json_format
from rest_framework.authtoken.models import Token

from deuz_django.models import Run, RunStatus, TaskContext
from deuz_django.protocols.a2a.tasks import task_state
from deuz_django.services import start_run

BASE = "/api/deuz/a2a/scripted"
STATE = a2a.TaskState

pytestmark = pytest.mark.django_db


@pytest.fixture
def caller(make_user: Callable[..., User]) -> Client:
    user = make_user("ann")
    return Client(
        headers={"Authorization": f"Token {Token.objects.create(user=user).key}"}
    )


def reason(answer: Any) -> str:
    (info,) = [d for d in answer.json()["error"]["details"] if "reason" in d]
    return str(info["reason"])


def run_of(user: User, status: str = RunStatus.RUNNING, **fields: Any) -> Run:
    run = start_run(
        agent="scripted", messages=[{"role": "user", "content": "hi"}], owner=user
    )
    Run.objects.filter(pk=run.pk).update(status=status, **fields)
    return Run.objects.get(pk=run.pk)


def test_the_card_can_be_served_at_the_site_root(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.django.protocols.root_card_urls"
    answer = Client().get("/.well-known/agent-card.json")
    assert answer.status_code == 200
    card = json_format.ParseDict(answer.json(), a2a.AgentCard())
    assert card.name == "scripted"
    assert card.supported_interfaces[0].url == f"http://testserver{BASE}"
    assert card.description == "You are a test agent."


def test_an_unknown_agent_is_not_found(caller: Client) -> None:
    answer = caller.post("/api/deuz/a2a/nobody/message:send", {}, "application/json")
    assert answer.status_code == 404
    assert reason(answer) == "METHOD_NOT_FOUND"


def test_a_body_that_is_not_a_request_is_invalid(caller: Client) -> None:
    answer = caller.post(f"{BASE}/message:send", {"message": 3}, "application/json")
    assert answer.status_code == 400
    assert reason(answer) == "INVALID_REQUEST"


def test_an_oversized_body_is_an_invalid_request(caller: Client, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = {"message": {"messageId": "m", "parts": [{"text": "x" * 2000}]}}
    answer = caller.post(f"{BASE}/message:send", body, "application/json")
    assert answer.status_code == 400
    assert reason(answer) == "INVALID_REQUEST"
    assert not Run.objects.exists()


def test_a_message_without_text_starts_nothing(caller: Client) -> None:
    body = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {}}]}}
    answer = caller.post(f"{BASE}/message:send", body, "application/json")
    assert answer.status_code == 400
    assert "text part" in answer.json()["error"]["message"]
    assert not Run.objects.exists()


def test_a_new_task_waits_for_the_contexts_last_task_to_complete(
    caller: Client,
) -> None:
    open_task = run_of(User.objects.get(username="ann"), RunStatus.SUSPENDED)
    TaskContext.objects.create(run=open_task, context_id="c-1")
    message = {"messageId": "m", "role": "ROLE_USER", "contextId": "c-1"}
    body = {"message": {**message, "parts": [{"text": "hi"}]}}
    answer = caller.post(f"{BASE}/message:send", body, "application/json")
    assert answer.status_code == 400
    assert reason(answer) == "UNSUPPORTED_OPERATION"
    assert open_task.run_id in answer.json()["error"]["message"]
    assert Run.objects.count() == 1


def test_push_notification_configs_are_not_supported_yet(
    caller: Client, make_user: Callable[..., User]
) -> None:
    run = run_of(User.objects.get(username="ann"))
    answer = caller.get(f"{BASE}/tasks/{run.run_id}/pushNotificationConfigs")
    assert answer.status_code == 400
    assert reason(answer) == "PUSH_NOTIFICATION_NOT_SUPPORTED"


def test_a_stop_by_a_person_cancels_and_one_by_policy_rejects(
    make_user: Callable[..., User],
) -> None:
    ann = make_user("ann")
    now = timezone.now()
    assert task_state(run_of(ann)) == STATE.TASK_STATE_SUBMITTED
    assert task_state(run_of(ann, legs=1)) == STATE.TASK_STATE_WORKING
    assert (
        task_state(run_of(ann, RunStatus.SUSPENDED)) == STATE.TASK_STATE_INPUT_REQUIRED
    )
    assert task_state(run_of(ann, RunStatus.COMPLETED)) == STATE.TASK_STATE_COMPLETED
    stopped = run_of(ann, RunStatus.STOPPED, stopped_by=ann, stopped_at=now)
    assert task_state(stopped) == STATE.TASK_STATE_CANCELED
    by_limit = run_of(ann, RunStatus.STOPPED, stopped_at=now, stop_reason="steps")
    assert task_state(by_limit) == STATE.TASK_STATE_REJECTED


def test_the_list_is_the_callers_filtered_by_state_a_page_at_a_time(
    caller: Client, make_user: Callable[..., User]
) -> None:
    ann = User.objects.get(username="ann")
    done = [run_of(ann, RunStatus.COMPLETED) for _ in range(3)]
    waiting = run_of(ann, RunStatus.SUSPENDED)
    run_of(make_user("bo"), RunStatus.COMPLETED)

    def page(**query: Any) -> a2a.ListTasksResponse:
        answer = caller.get(f"{BASE}/tasks", query)
        assert answer.status_code == 200, answer.content
        return json_format.ParseDict(answer.json(), a2a.ListTasksResponse())

    first = page(status="TASK_STATE_COMPLETED", pageSize=2)
    assert first.total_size == 3
    second = page(
        status="TASK_STATE_COMPLETED", pageSize=2, pageToken=first.next_page_token
    )
    assert [t.id for t in [*first.tasks, *second.tasks]] == [
        r.run_id for r in reversed(done)
    ]
    assert not second.next_page_token
    assert [t.id for t in page(status="TASK_STATE_INPUT_REQUIRED").tasks] == [
        waiting.run_id
    ]
    later = (timezone.now() + timedelta(hours=1)).isoformat()
    assert not page(statusTimestampAfter=later).tasks
    for query in ({"status": "DONE"}, {"statusTimestampAfter": "-1"}):
        bad = caller.get(f"{BASE}/tasks", query)
        assert bad.status_code == 400
        assert reason(bad) == "INVALID_PARAMS"
