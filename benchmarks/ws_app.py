"""The ASGI app the WebSocket benchmark serves: the deuz consumer and a bare baseline.

``/ws/bare/?n=N`` is a bare Channels consumer that sends N frames shaped like the journal's
(``{"runId","seq","part"}``) straight from ``send`` — the fastest a consumer can go —
yielding every 200 frames as the deuz consumer does; ``&delay=S`` paces them, a frame
every S seconds from the client's first frame on, as a streaming model would.
"""

from __future__ import annotations

import asyncio
import json
import os
from urllib.parse import parse_qs

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
django_application = get_asgi_application()  # sets Django up

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from deuz_django.routing import websocket_urlpatterns  # noqa: E402


class BareConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        await self.accept()
        query = parse_qs(self.scope["query_string"].decode())
        self.count = int(query.get("n", ["1000"])[0])
        self.delay = float(query.get("delay", ["0"])[0])
        if not self.delay:
            await self.stream()

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        """A paced stream starts on the client's first frame, as a run on ``start``."""
        self.streaming = asyncio.ensure_future(self.stream())

    async def stream(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        for seq in range(self.count):
            part = json.dumps(
                {"type": "text-delta", "text": f"w{seq} "}, separators=(",", ":")
            )
            if self.delay:  # a frame every ``delay`` seconds, as a streaming model
                due += self.delay
                await asyncio.sleep(max(0.0, due - loop.time()))
            await self.send(text_data=f'{{"runId":"bare","seq":{seq},"part":{part}}}')
            if seq % 200 == 199:
                await asyncio.sleep(0)
        await self.send(
            text_data=f'{{"type":"done","runId":"bare","seq":{self.count}}}'
        )


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
