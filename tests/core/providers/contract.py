"""The failure and cancellation behaviour every provider adapter shares.

A provider's test module subclasses :class:`ProviderContract`, names its fixtures and
error shapes, and provides a ``make_model`` fixture; every test here then runs against
that adapter on its real SDK client and the local replay server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from deuz_django.core import (
    AbortController,
    ErrorPart,
    LanguageModel,
    MalformedEventError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    RateLimitError,
    generate_text,
    stream_chat,
)
from deuz_django.core.wire import to_ui_part

from .helpers import API_KEY
from .sse_server import Reply, SSEServer, json_error, sse

MakeModel = Callable[..., LanguageModel]


class ProviderContract:
    provider: ClassVar[str]
    text_fixture: ClassVar[str]  # a text reply of at least 5 events
    error_event_fixture: ClassVar[str]
    malformed_fixture: ClassVar[str]
    error_event_status: ClassVar[int]  # what the recorded mid-stream error maps to

    def error_body(self, kind: str, message: str) -> dict[str, Any]:
        """The provider's JSON error body for a ``rate_limit`` / ``server`` / ``invalid``."""
        raise NotImplementedError

    # -- HTTP errors --------------------------------------------------------------------

    async def test_rate_limit_is_a_rate_limit_error_with_the_message_redacted(
        self, server: SSEServer, make_model: MakeModel
    ) -> None:
        message = f"Rate limit reached for key {API_KEY}. Try again in 20s."
        server.push(
            json_error(
                429, self.error_body("rate_limit", message), (("retry-after", "20"),)
            )
        )
        with pytest.raises(RateLimitError) as caught:
            await generate_text(model=make_model(), prompt="hi")
        error = caught.value
        assert error.status_code == 429
        assert error.provider == self.provider
        assert "Rate limit reached for key" in str(error)
        assert API_KEY not in str(error)
        assert f"****{API_KEY[-4:]}" in str(error)

    @pytest.mark.parametrize(("status", "kind"), [(400, "invalid"), (500, "server")])
    async def test_other_statuses_are_http_errors_with_the_status_code(
        self, server: SSEServer, make_model: MakeModel, status: int, kind: str
    ) -> None:
        server.push(json_error(status, self.error_body(kind, "The request failed.")))
        with pytest.raises(ModelHTTPError) as caught:
            await generate_text(model=make_model(), prompt="hi")
        assert not isinstance(caught.value, RateLimitError)
        assert caught.value.status_code == status
        assert "The request failed." in str(caught.value)

    async def test_a_failure_is_the_streams_error_part_with_a_redacted_message(
        self, server: SSEServer, make_model: MakeModel
    ) -> None:
        server.push(json_error(429, self.error_body("rate_limit", f"key {API_KEY}")))
        stream = stream_chat(model=make_model(), prompt="hi")
        parts = [part async for part in stream.full_stream]
        assert isinstance(parts[-1], ErrorPart)
        assert isinstance(parts[-1].error, RateLimitError)
        wire = to_ui_part(parts[-1])
        assert wire is not None
        assert API_KEY not in wire["message"]

    # -- broken streams -----------------------------------------------------------------

    async def test_an_error_event_mid_stream_is_a_typed_error(
        self, server: SSEServer, make_model: MakeModel
    ) -> None:
        server.push(sse(self.error_event_fixture))
        with pytest.raises(ModelError) as caught:
            await generate_text(model=make_model(), prompt="hi")
        assert isinstance(caught.value, ModelHTTPError)
        assert caught.value.status_code == self.error_event_status

    async def test_a_mid_stream_disconnect_is_a_connection_error(
        self, server: SSEServer, make_model: MakeModel
    ) -> None:
        server.push(sse(self.text_fixture, limit=4, end="drop"))
        with pytest.raises(ModelConnectionError):
            await generate_text(model=make_model(), prompt="hi")

    async def test_a_stream_that_ends_before_its_finish_is_a_connection_error(
        self, server: SSEServer, make_model: MakeModel
    ) -> None:
        server.push(sse(self.text_fixture, limit=4))
        with pytest.raises(ModelConnectionError, match="ended before"):
            await generate_text(model=make_model(), prompt="hi")

    async def test_an_unreadable_event_is_a_malformed_event_error(
        self, server: SSEServer, make_model: MakeModel
    ) -> None:
        server.push(sse(self.malformed_fixture))
        with pytest.raises(MalformedEventError):
            await generate_text(model=make_model(), prompt="hi")

    # -- never a hang -------------------------------------------------------------------

    async def test_a_stream_that_stalls_times_out(
        self, server: SSEServer, make_model: MakeModel
    ) -> None:
        server.push(sse(self.text_fixture, limit=3, end="stall"))
        with pytest.raises(ModelTimeoutError):
            await generate_text(model=make_model(timeout=0.3), prompt="hi")

    async def test_a_request_that_is_never_answered_times_out(
        self, server: SSEServer, make_model: MakeModel
    ) -> None:
        server.push(Reply(hang=True))
        with pytest.raises(ModelTimeoutError):
            await generate_text(model=make_model(timeout=0.3), prompt="hi")

    # -- cancellation -------------------------------------------------------------------

    async def test_aborting_mid_stream_closes_the_provider_connection(
        self, server: SSEServer, make_model: MakeModel
    ) -> None:
        server.push(sse(self.text_fixture, interval=0.05, end="stall"))
        controller = AbortController()
        stream = stream_chat(model=make_model(), prompt="hi", signal=controller.signal)
        texts = []
        async for part in stream.full_stream:
            if part.type == "text-delta":
                texts.append(part)
                controller.abort()
        assert await stream.finish_reason == "aborted"
        assert len(texts) == 1
        assert await asyncio.to_thread(server.disconnected.wait, 5.0)

    async def test_aborting_while_waiting_for_the_response_closes_the_connection(
        self, server: SSEServer, make_model: MakeModel
    ) -> None:
        server.push(Reply(hang=True))
        controller = AbortController()
        stream = stream_chat(model=make_model(), prompt="hi", signal=controller.signal)
        asyncio.get_running_loop().call_later(0.1, controller.abort)
        await stream.consume()
        assert await stream.finish_reason == "aborted"
        assert await asyncio.to_thread(server.disconnected.wait, 5.0)
