"""What the provider test modules share: the test key, a tool, and request helpers."""

from __future__ import annotations

from typing import Any

from deuz_django.core import LanguageModel, Message, ModelRequest, tool

# Key-shaped, so tests can check it never appears in an error message.
API_KEY = "sk-test-0123456789abcdefghijklmnopqrstuvwxyz"


@tool
def get_weather(city: str, units: str = "celsius") -> dict[str, Any]:
    """The weather for a city."""
    return {"city": city, "temp": 3, "units": units}


def ask(*messages: Message, **fields: Any) -> ModelRequest:
    """A request with ``messages`` (a lone "hi" by default)."""
    return ModelRequest(messages=messages or (Message("user", "hi"),), **fields)


async def collect(model: LanguageModel, request: ModelRequest) -> list[Any]:
    """Every event the model streams for ``request``."""
    return [event async for event in model.stream(request)]
