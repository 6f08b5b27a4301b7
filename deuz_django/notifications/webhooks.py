"""Webhooks: every event as a signed JSON ``POST`` to a URL of yours.

The body (UTF-8 JSON, camelCase like the rest of the wire) is written when the event
happens and kept in the delivery log; every attempt sends those bytes again, under the
same ``id``, signed afresh by the Standard Webhooks scheme
(:mod:`deuz_django.core.webhooks`)::

    POST /deuz HTTP/1.1
    Content-Type: application/json
    webhook-id: 5b0c1c2e-8f0a-4a53-9d0e-1f6f1f0f3a11
    webhook-timestamp: 1796301312
    webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">

    {"id": "5b0c1c2e-…", "event": "approval.requested", "createdAt": "2026-12-03T09:55:12.345Z",
     "data": {"run": {…}, "approval": {…, "links": {"approve": …, "deny": …, "open": …}}}}

A 2xx answer delivers it; anything else, a timeout or a refused connection is retried
with backoff (redirects are not followed: give the final URL). Approval tokens and
secrets are never sent. Options: ``URL``, ``SECRET`` (``whsec_`` and the base64 of 24
to 64 random bytes, as Standard Webhooks libraries take it), ``EVENTS`` (all by
default), ``TIMEOUT`` (seconds, 10), ``MAX_ATTEMPTS``.

Receivers check requests with :func:`verify_signature` (or any Standard Webhooks
library) and drop the ids they have seen.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import urllib3

from ..approvals import links as action_links
from ..conf import deuz_settings
from ..core.exceptions import InvalidInputError
from ..core.webhooks import SECRET_PREFIX, secret_key, sign, verify_signature
from ..models import Approval, Run
from ..models.deliveries import Delivery, DeliveryChannel
from .notifiers import (
    DEFAULT_MAX_ATTEMPTS,
    DeliveryFailed,
    Event,
    Notifier,
    NotifierConfigError,
)

__all__ = [
    "WebhookNotifier",
    "checked_secret",
    "checked_timeout",
    "payload",
    "post_signed",
    "verify_signature",
]

# The Standard Webhooks bounds of an HMAC-SHA256 signing secret.
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64
MAX_TIMEOUT = 60
ANSWER_EXCERPT = 200


class WebhookNotifier(Notifier):
    """POST every event it wants to ``url``, signed with ``secret``."""

    channel = DeliveryChannel.WEBHOOK

    def __init__(
        self,
        *,
        url: str | None = None,
        secret: str | None = None,
        events: Sequence[str] | None = None,
        timeout: float = 10,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        super().__init__(events=events, max_attempts=max_attempts)
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise NotifierConfigError(
                f"URL must be an http:// or https:// address, not {url!r}."
            )
        assert isinstance(url, str)  # checked above, in a way mypy cannot follow
        self.url = url
        self.secret = checked_secret(secret)
        self.timeout = checked_timeout(timeout)

    def deliveries(self, event: Event) -> list[Delivery]:
        delivery_id = uuid.uuid4()
        body = json.dumps(payload(event, str(delivery_id)), ensure_ascii=False)
        return [self.delivery(event, self.url, body, delivery_id=delivery_id)]

    def sends(self, delivery: Delivery) -> bool:
        return super().sends(delivery) and delivery.target == self.url

    def send(self, delivery: Delivery) -> int:
        return post_signed(delivery, secret=self.secret, timeout=self.timeout)


def post_signed(
    delivery: Delivery,
    *,
    secret: str,
    timeout: float,
    headers: dict[str, str] | None = None,
) -> int:
    """POST ``delivery``'s body to its target, signed with ``secret`` (and ``headers``);
    the HTTP status of a 2xx answer, else :class:`DeliveryFailed`. Every webhook the
    app sends goes through here (also A2A's push notifications)."""
    body = delivery.body.encode()
    sent = {
        "Content-Type": "application/json",
        "User-Agent": "deuz-django webhooks",
        **(headers or {}),
        **sign(body, secret, delivery_id=str(delivery.delivery_id)),
    }
    try:
        response = urllib3.request(
            "POST",
            delivery.target,
            body=body,
            headers=sent,
            timeout=urllib3.Timeout(total=timeout),
            retries=False,
            redirect=False,
        )
    except urllib3.exceptions.HTTPError as error:
        raise DeliveryFailed(f"{type(error).__name__}: {error}") from error
    if 200 <= response.status < 300:
        return int(response.status)
    answer = response.data[:ANSWER_EXCERPT].decode(errors="replace")
    raise DeliveryFailed(
        f"HTTP {response.status}: {answer}".strip(), status_code=response.status
    )


def checked_secret(secret: object) -> str:
    """``SECRET``, if it is a Standard Webhooks secret (else :class:`NotifierConfigError`)."""
    problem = _secret_problem(secret)
    if problem is not None:
        raise NotifierConfigError(
            f"SECRET must be a Standard Webhooks secret, '{SECRET_PREFIX}' and the "
            f"base64 of {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} random bytes "
            f"(receivers verify every request with it), but {problem}.",
            check_id="deuz_django.E022",
        )
    assert isinstance(secret, str)  # what _secret_problem checked
    return secret


def checked_timeout(timeout: object) -> float:
    """``TIMEOUT`` in seconds, above 0 and at most ``MAX_TIMEOUT``."""
    if (
        not isinstance(timeout, int | float)
        or isinstance(timeout, bool)
        or not 0 < timeout <= MAX_TIMEOUT
    ):
        raise NotifierConfigError(
            f"TIMEOUT must be a number of seconds above 0, at most {MAX_TIMEOUT}."
        )
    return float(timeout)


def _secret_problem(secret: object) -> str | None:
    """What is wrong with ``secret`` as a ``SECRET``, in words that never repeat it."""
    if secret is None or secret == "":
        return "it is missing"
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        return f"it does not start with '{SECRET_PREFIX}'"
    try:
        size = len(secret_key(secret))
    except InvalidInputError:
        return f"what follows '{SECRET_PREFIX}' is not base64, or is empty"
    if not MIN_SECRET_BYTES <= size <= MAX_SECRET_BYTES:
        return f"it holds {size} bytes"
    return None


def payload(event: Event, delivery_id: str) -> dict[str, Any]:
    """The JSON a webhook receives for ``event``."""
    data: dict[str, Any] = {"run": run_summary(event.run)}
    if event.approval is not None:
        data["approval"] = approval_summary(event.approval)
    if event.type == "run.suspended":
        data["approvals"] = [approval_summary(a) for a in event.approvals]
    if event.type == "run.failed":
        data["error"] = event.error
    if event.type == "run.stopped":
        data["stop"] = {"by": event.run.stopper, "reason": event.run.stop_reason}
    if event.type == "approval.escalated":
        data["to"] = event.to
    return {
        "id": delivery_id,
        "event": event.type,
        "createdAt": timestamp(event.created_at),
        "data": data,
    }


def run_summary(run: Run) -> dict[str, Any]:
    return {
        "runId": run.run_id,
        "agent": run.agent,
        "title": run.title,
        "status": run.status,
        "owner": run.owner.get_username() if run.owner else None,
        "stepIndex": run.step_index,
        "lastError": run.last_error,
        "createdAt": timestamp(run.created_at),
        "updatedAt": timestamp(run.updated_at),
    }


def approval_summary(approval: Approval) -> dict[str, Any]:
    """An approval as receivers see it: never its token."""
    summary = {
        "approvalId": approval.approval_id,
        "kind": approval.kind,
        "toolName": approval.tool_name,
        "toolCallId": approval.tool_call_id,
        "input": approval.input,
        "editedInput": approval.edited_input,
        "agentPath": list(approval.agent_path or ()),
        "status": approval.status,
        "createdAt": timestamp(approval.created_at),
        "decidedAt": timestamp(approval.decided_at),
        "decidedBy": approval.decided_by.get_username()
        if approval.decided_by
        else None,
        "operator": approval.operator or None,
        "reason": approval.reason,
    }
    if approval.is_pending and deuz_settings.SITE_URL:
        summary["links"] = action_links.links(approval)
    return summary


def timestamp(moment: datetime | None) -> str | None:
    """``2026-12-03T09:55:12.345Z``."""
    if moment is None:
        return None
    utc = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return utc.replace("+00:00", "Z")
