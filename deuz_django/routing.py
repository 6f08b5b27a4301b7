"""WebSocket routes: include ``websocket_urlpatterns`` in the project's ASGI router."""

from django.urls import path

from .streaming.consumers import RunConsumer

websocket_urlpatterns = [path("ws/deuz/", RunConsumer.as_asgi())]
