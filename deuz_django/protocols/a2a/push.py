"""A2A push notifications, delivered as the app's webhooks are: every status change of
a task with push configs is a row of the delivery log (retried with backoff, shown in
the admin), POSTed to each config's URL as a ``StreamResponse`` JSON, signed by the
Standard Webhooks scheme, with the caller's token in ``X-A2A-Notification-Token``.

Turn it on with a notifier (the secret signs every request; receivers verify it)::

    DEUZ["NOTIFIERS"] = [
        {"BACKEND": "deuz_django.protocols.a2a.push.A2APushNotifier",
         "SECRET": "whsec_…"},
    ]

Without one the card says ``pushNotifications: false`` and the config endpoints answer
``PUSH_NOTIFICATION_NOT_SUPPORTED``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
)
from google.protobuf import json_format

from ...models import Delivery, DeliveryChannel, PushConfig, Run
from ...notifications import configured_notifiers
from ...notifications.notifiers import DEFAULT_MAX_ATTEMPTS, Event, Notifier
from ...notifications.webhooks import checked_secret, checked_timeout, post_signed
from .tasks import context_id, task_status

TOKEN_HEADER = "X-A2A-Notification-Token"
MAX_ID = 100  # PushConfig.config_id
MAX_TOKEN = 500  # PushConfig.token


class A2APushNotifier(Notifier):
    """POST a task's status to its push configs when its run suspends, completes,
    stops or fails."""

    channel = DeliveryChannel.WEBHOOK
    supported_events = ("run.suspended", "run.completed", "run.stopped", "run.failed")

    def __init__(
        self,
        *,
        secret: str | None = None,
        events: Sequence[str] | None = None,
        timeout: float = 10,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        super().__init__(events=events, max_attempts=max_attempts)
        self.secret = checked_secret(secret)
        self.timeout = checked_timeout(timeout)

    def deliveries(self, event: Event) -> list[Delivery]:
        configs = list(PushConfig.objects.filter(run=event.run))
        if not configs:
            return []
        body = json.dumps(status_event(event.run))
        return [
            self.delivery(event, config.url, body, delivery_id=uuid.uuid4())
            for config in configs
        ]

    def sends(self, delivery: Delivery) -> bool:
        return (
            super().sends(delivery)
            and PushConfig.objects.filter(
                run_id=delivery.run_id, url=delivery.target
            ).exists()
        )

    def send(self, delivery: Delivery) -> int:
        config = PushConfig.objects.filter(
            run_id=delivery.run_id, url=delivery.target
        ).first()
        token = {TOKEN_HEADER: config.token} if config and config.token else {}
        return post_signed(
            delivery, secret=self.secret, timeout=self.timeout, headers=token
        )


def status_event(run: Run) -> dict[str, Any]:
    """What a push carries: the task's status as a stream event."""
    update = a2a.TaskStatusUpdateEvent(
        task_id=run.run_id, context_id=context_id(run), status=task_status(run)
    )
    event: dict[str, Any] = json_format.MessageToDict(
        a2a.StreamResponse(status_update=update)
    )
    return event


def push_enabled() -> bool:
    return any(isinstance(n, A2APushNotifier) for n in configured_notifiers())


def _proto(config: PushConfig, run: Run) -> a2a.TaskPushNotificationConfig:
    return a2a.TaskPushNotificationConfig(
        id=config.config_id, task_id=run.run_id, url=config.url, token=config.token
    )


def create_config(
    run: Run, wanted: a2a.TaskPushNotificationConfig
) -> a2a.TaskPushNotificationConfig:
    """Keep ``wanted`` for ``run`` (the same id again replaces it)."""
    if not push_enabled():
        raise PushNotificationNotSupportedError()
    parts = urlsplit(wanted.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidParamsError(
            f"url: an http:// or https:// address, not {wanted.url!r}."
        )
    if len(wanted.id) > MAX_ID or len(wanted.token) > MAX_TOKEN:
        raise InvalidParamsError(
            f"id, token: at most {MAX_ID} and {MAX_TOKEN} characters."
        )
    config, _created = PushConfig.objects.update_or_create(
        run=run,
        config_id=wanted.id or uuid.uuid4().hex,
        defaults={"url": wanted.url, "token": wanted.token},
    )
    return _proto(config, run)


def configs(
    run: Run, config_id: str | None = None
) -> list[a2a.TaskPushNotificationConfig]:
    """The run's configs (the one named ``config_id``: else TASK_NOT_FOUND)."""
    if not push_enabled():
        raise PushNotificationNotSupportedError()
    found = PushConfig.objects.filter(run=run)
    if config_id is not None:
        found = found.filter(config_id=config_id)
        if not found.exists():
            raise TaskNotFoundError(f"No push notification config {config_id!r}.")
    return [_proto(config, run) for config in found]


def delete_config(run: Run, config_id: str) -> None:
    configs(run, config_id)
    PushConfig.objects.filter(run=run, config_id=config_id).delete()
