"""Notifications in tests: settings that turn notifiers on, a real webhook receiver on a
local port, and a mail backend whose server is down."""

from __future__ import annotations

import json
import smtplib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.conf import settings
from django.core.mail.backends.base import BaseEmailBackend
from django.test import override_settings
from django.utils import timezone

from deuz_django.models import Delivery

# A Standard Webhooks secret: "whsec_" and the base64 of 32 bytes.
SECRET = "whsec_d2ViaG9vay1zZWNyZXQtZm9yLXRoZS10ZXN0cy0wMTI="
SITE = "https://ops.example.com"
EMAIL = {"BACKEND": "deuz_django.notifications.emails.EmailNotifier"}
HOLD_SECONDS = 60  # the longest a held request waits (a guard, not a timing)


def notifying(*entries: dict[str, Any], **deuz: Any) -> override_settings:
    """``DEUZ`` with these notifiers (and a ``SITE_URL``)."""
    return override_settings(
        DEUZ={
            **settings.DEUZ,
            "NOTIFIERS": list(entries),
            "SITE_URL": SITE,
            **deuz,
        }
    )


def webhook(url: str, **options: Any) -> dict[str, Any]:
    return {
        "BACKEND": "deuz_django.notifications.webhooks.WebhookNotifier",
        "URL": url,
        "SECRET": SECRET,
        **{key.upper(): value for key, value in options.items()},
    }


def later(hours: float = 24) -> Any:
    """A moment far enough ahead for every backoff to have passed."""
    return timezone.now() + timedelta(hours=hours)


def deliveries(**filters: Any) -> list[Delivery]:
    return list(Delivery.objects.filter(**filters).order_by("id"))


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """A real HTTP server, in a thread, that records every POST and answers with the
    statuses queued in ``statuses`` (200 once they are used up)."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.statuses: list[int] = []
        # Requests wait for these before answering, one each (a server that hangs).
        self.holds: list[threading.Event] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                receiver.requests.append(
                    Received(self.path, dict(self.headers.items()), body)
                )
                if receiver.holds:
                    receiver.holds.pop(0).wait(HOLD_SECONDS)
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", "/elsewhere")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok" if status < 400 else b"no")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/deuz"

    def events(self) -> list[str]:
        return [r.json()["event"] for r in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    try:
        yield server
    finally:
        server.close()


class DownMailBackend(BaseEmailBackend):
    """A mail server that is away: every send fails as a dropped connection does."""

    def send_messages(self, email_messages: Any) -> int:
        raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")


MAIL_SERVER_DOWN = override_settings(
    MAILERS={"default": {"BACKEND": "tests.django.notify_support.DownMailBackend"}}
)
