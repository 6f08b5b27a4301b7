"""The ASGI app the WebSocket benchmark serves: the deuz consumer and a bare baseline.

``/ws/bare/?n=N`` is a bare Channels consumer that sends N frames shaped like the journal's
(``{"runId","seq","part"}``) straight from ``send`` — the fastest a consumer can go —
yielding every 200 frames as the deuz consumer does.
"""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.routing import ProtocolTypeRouter, URLRouter
from django.urls import path

from deuz_django.routing import websocket_urlpatterns
from example_project.asgi import django_application


class BareConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        await self.accept()
        query = parse_qs(self.scope["query_string"].decode())
        count = int(query.get("n", ["1000"])[0])
        for seq in range(count):
            part = json.dumps(
                {"type": "text-delta", "text": f"w{seq} "}, separators=(",", ":")
            )
            await self.send(text_data=f'{{"runId":"bare","seq":{seq},"part":{part}}}')
            if seq % 200 == 199:
                await asyncio.sleep(0)
        await self.send(text_data=f'{{"type":"done","runId":"bare","seq":{count}}}')


application = ProtocolTypeRouter(
    {
        "http": django_application,
        "websocket": AuthMiddlewareStack(
            URLRouter(
                [path("ws/bare/", BareConsumer.as_asgi()), *websocket_urlpatterns]
            )
        ),
    }
)
