"""The webhook receiver of docs/notifications.md works as written against real signed
requests: it takes a delivery once, drops its retry, and refuses a forged or a replayed
one, and one sent again under a new id."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.core.cache import cache
from django.test import RequestFactory, override_settings

from deuz_django.core.webhooks import sign
from deuz_django.notifications.notifiers import Event
from deuz_django.notifications.webhooks import WebhookNotifier
from tests.django.notify_support import SECRET, notifying
from tests.django.run_support import approval, suspended
from tests.live_site import ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver_view() -> tuple[Any, list[str]]:
    """The documented receiver, its ``post_to_chat`` recording what it is given."""
    page = (ROOT / "docs" / "notifications.md").read_text()
    section = page[page.index("**A receiver that checks signatures.**") :]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None
    posted: list[str] = []
    namespace: dict[str, Any] = {"post_to_chat": posted.append}
    exec(compile(found.group(1), "docs/notifications.md", "exec"), namespace)
    cache.clear()
    return namespace["deuz_webhook"], posted


def test_the_documented_receiver_takes_a_delivery_once_and_refuses_forgeries(
    receiver_view: tuple[Any, list[str]],
) -> None:
    view, posted = receiver_view
    run = suspended()
    event = Event("approval.requested", run, approval(run, "refund"))
    with notifying():
        [delivery] = WebhookNotifier(
            url="https://x.example/", secret=SECRET
        ).deliveries(event)
    body = delivery.body.encode()

    def post(payload: bytes, headers: dict[str, str]) -> Any:
        request = RequestFactory().post(
            "/hooks/deuz",
            payload,
            content_type="application/json",
            headers=headers,
        )
        return view(request)

    headers = sign(body, SECRET, delivery_id=str(delivery.delivery_id))
    with override_settings(DEUZ_WEBHOOK_SECRET=SECRET):
        assert post(body, headers).status_code == 204
        assert post(body, headers).status_code == 200  # a retry: dropped
        forged = post(body.replace(b"refund", b"rufund"), headers)
        renamed = post(body, {**headers, "webhook-id": str(uuid.uuid4())})
        old = sign(
            body,
            SECRET,
            delivery_id=str(uuid.uuid4()),
            timestamp=int(headers["webhook-timestamp"]) - 301,
        )
        replayed = post(body, old)
    assert len(posted) == 1
    assert posted[0].startswith("refund waits: https://ops.example.com/deuz/")
    for refused in (forged, renamed):
        assert refused.status_code == 400
        assert b"does not match the id, timestamp and body" in refused.content
    assert replayed.status_code == 400
    assert b"a replay" in replayed.content
