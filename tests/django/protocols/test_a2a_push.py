"""A2A push notifications: configs kept per task through the protocol, and each status
change POSTed to them as the app's webhooks are — in the delivery log, signed, with the
caller's token."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import a2a_pb2 as a2a
from django.contrib.auth.models import User
from django.test import Client
from google.protobuf import json_format
from rest_framework.authtoken.models import Token

from deuz_django import services
from deuz_django.core.webhooks import verify_signature
from deuz_django.models import Delivery, PushConfig, Run
from deuz_django.protocols.a2a.push import TOKEN_HEADER
from tests.django.notify_support import SECRET, Receiver, notifying

pytestmark = pytest.mark.django_db

BASE = "/api/deuz/a2a/asker"
PUSH = {"BACKEND": "deuz_django.protocols.a2a.push.A2APushNotifier", "SECRET": SECRET}


@pytest.fixture
def caller(ann: User) -> Client:
    return Client(
        headers={"Authorization": f"Token {Token.objects.create(user=ann).key}"}
    )


def reason(answer: Any) -> str:
    (info,) = [d for d in answer.json()["error"]["details"] if "reason" in d]
    return str(info["reason"])


def test_configs_are_kept_listed_and_deleted_per_task(
    caller: Client, ann: User
) -> None:
    run = services.start_run(
        agent="asker", messages=[{"role": "user", "content": "hi"}], owner=ann
    )
    configs = f"{BASE}/tasks/{run.run_id}/pushNotificationConfigs"
    with notifying(PUSH):
        card = Client().get(f"{BASE}/.well-known/agent-card.json").json()
        assert card["capabilities"]["pushNotifications"] is True
        made = caller.post(
            configs,
            {"id": "p1", "url": "https://hooks.example.com/a2a", "token": "t"},
            "application/json",
        )
        assert made.status_code == 200, made.content
        assert made.json()["taskId"] == run.run_id
        listed = caller.get(configs).json()["configs"]
        assert [c["id"] for c in listed] == ["p1"]
        assert (
            caller.get(f"{configs}/p1").json()["url"] == "https://hooks.example.com/a2a"
        )
        bad = caller.post(configs, {"url": "ftp://x"}, "application/json")
        assert bad.status_code == 400
        assert reason(bad) == "INVALID_PARAMS"
        assert caller.delete(f"{configs}/p1").status_code == 200
        assert reason(caller.get(f"{configs}/p1")) == "TASK_NOT_FOUND"
    assert not PushConfig.objects.exists()


def test_without_the_notifier_push_is_not_supported(caller: Client, ann: User) -> None:
    card = Client().get(f"{BASE}/.well-known/agent-card.json").json()
    assert card["capabilities"].get("pushNotifications", False) is False
    body = {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        "configuration": {
            "returnImmediately": True,
            "taskPushNotificationConfig": {"url": "https://hooks.example.com/a2a"},
        },
    }
    answer = caller.post(f"{BASE}/message:send", body, "application/json")
    assert reason(answer) == "PUSH_NOTIFICATION_NOT_SUPPORTED"
    assert not Run.objects.exists()


def test_a_suspension_is_pushed_signed_with_the_callers_token(
    ann: User, receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    run = services.start_run(
        agent="asker", messages=[{"role": "user", "content": "hi"}], owner=ann
    )
    PushConfig.objects.create(run=run, config_id="p1", url=receiver.url, token="tok-1")
    with notifying(PUSH), django_capture_on_commit_callbacks(execute=True):
        assert services.resume_run(run.run_id).status == "suspended"
    (request,) = receiver.requests
    verify_signature(request.body, request.headers, SECRET)  # raises if forged
    assert request.headers[TOKEN_HEADER] == "tok-1"
    event = json_format.ParseDict(request.json(), a2a.StreamResponse())
    assert event.status_update.task_id == run.run_id
    assert event.status_update.status.state == a2a.TaskState.TASK_STATE_INPUT_REQUIRED
    (delivery,) = Delivery.objects.filter(run=run)
    assert (delivery.target, delivery.status) == (receiver.url, "delivered")
