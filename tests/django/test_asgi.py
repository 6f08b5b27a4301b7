"""``deuz_django.asgi.get_asgi_application``: a project's whole ASGI application."""

from __future__ import annotations

from typing import Any

import pytest
from channels.generic.websocket import WebsocketConsumer
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.urls import path

from deuz_django.asgi import get_asgi_application

pytestmark = pytest.mark.django_db(transaction=True)


class Echo(WebsocketConsumer):
    def connect(self) -> None:
        self.accept()

    def receive(self, text_data: str | None = None, bytes_data: Any = None) -> None:
        self.send(text_data=text_data)


async def test_http_goes_to_django() -> None:
    response = await HttpCommunicator(
        get_asgi_application(),
        "GET",
        "/api/deuz/runs/",
        headers=[(b"host", b"testserver")],
    ).get_response()
    assert response["status"] == 401  # the API, answering an anonymous client


async def test_the_deuz_socket_is_routed_and_authenticated() -> None:
    ws = WebsocketCommunicator(
        get_asgi_application(), "/ws/deuz/", headers=[(b"origin", b"http://testserver")]
    )
    await ws.connect()
    closed = await ws.receive_output(timeout=2)
    assert (closed["type"], closed["code"]) == ("websocket.close", 4401)  # the consumer


async def test_a_socket_from_a_foreign_origin_is_refused() -> None:
    ws = WebsocketCommunicator(
        get_asgi_application(),
        "/ws/deuz/",
        headers=[(b"origin", b"https://evil.example")],
    )
    connected, _code = await ws.connect()
    assert connected is False


async def test_the_projects_own_socket_routes_come_after_the_deuz_one() -> None:
    application = get_asgi_application(
        websocket_urlpatterns=[path("ws/echo/", Echo.as_asgi())]
    )
    ws = WebsocketCommunicator(
        application, "/ws/echo/", headers=[(b"origin", b"http://testserver")]
    )
    connected, _code = await ws.connect()
    assert connected
    await ws.send_to(text_data="hi")
    assert await ws.receive_from() == "hi"
    await ws.disconnect()
