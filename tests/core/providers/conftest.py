"""Fixtures for the provider adapters: a local replay server and models pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from deuz_django.core.providers import AnthropicModel, OpenAIChatModel

from .helpers import API_KEY
from .sse_server import SSEServer


@pytest.fixture
def server() -> Iterator[SSEServer]:
    with SSEServer() as running:
        yield running


async def _factory[M: (OpenAIChatModel, AnthropicModel)](
    adapter: type[M], default_model: str, base_url: str
) -> AsyncIterator[Callable[..., M]]:
    """Models on the real SDK client, aimed at the local server, without retries; their
    clients are closed afterwards."""
    built: list[M] = []

    def make(model: str = default_model, **options: Any) -> M:
        defaults = {"api_key": API_KEY, "base_url": base_url, "max_retries": 0}
        built.append(adapter(model, **{**defaults, "timeout": 10.0, **options}))
        return built[-1]

    yield make
    for model in built:
        await model.client.close()


@pytest.fixture
async def make_openai(
    server: SSEServer,
) -> AsyncIterator[Callable[..., OpenAIChatModel]]:
    async for make in _factory(OpenAIChatModel, "gpt-4.1-mini", f"{server.url}/v1"):
        yield make


@pytest.fixture
async def make_anthropic(
    server: SSEServer,
) -> AsyncIterator[Callable[..., AnthropicModel]]:
    async for make in _factory(AnthropicModel, "claude-sonnet-4-5", server.url):
        yield make
