"""``get_model("provider:model")``: a model from one string, keys from the environment.

>>> get_model("openai:gpt-4.1-mini")                   # OPENAI_API_KEY
>>> get_model("anthropic:claude-sonnet-4-5")           # ANTHROPIC_API_KEY
>>> get_model("openai-compatible:llama3.1", base_url="http://localhost:11434/v1")

Keyword arguments go to the adapter (``api_key``, ``base_url``, ``timeout``,
``max_retries``, ``extra_body``; ``max_tokens`` and ``thinking`` for Anthropic).
An ``openai-compatible`` server never receives ``OPENAI_API_KEY``: it gets the ``api_key``
passed here, or a placeholder for servers that ignore keys (Ollama, vLLM).
"""

from __future__ import annotations

from typing import Any

from ..exceptions import InvalidInputError
from .anthropic import AnthropicModel
from .openai import OpenAIChatModel

COMPATIBLE_PLACEHOLDER_KEY = "not-needed"
PROVIDERS = ("anthropic", "openai", "openai-compatible")


def get_model(spec: str, **options: Any) -> OpenAIChatModel | AnthropicModel:
    """The adapter for ``"<provider>:<model>"``; raises :class:`InvalidInputError`
    for an unknown provider and ``ProviderNotInstalledError`` when its SDK is missing."""
    provider, sep, model = spec.partition(":")
    if not sep or not model:
        raise InvalidInputError(
            f"model {spec!r}: expected '<provider>:<model>', provider one of "
            f"{', '.join(PROVIDERS)}"
        )
    if provider == "openai":
        return OpenAIChatModel(model, **options)
    if provider == "anthropic":
        return AnthropicModel(model, **options)
    if provider == "openai-compatible":
        if not options.get("base_url") and options.get("client") is None:
            raise InvalidInputError(
                f"model {spec!r}: an openai-compatible model needs base_url="
            )
        if options.get("api_key") is None:
            options["api_key"] = COMPATIBLE_PLACEHOLDER_KEY
        return OpenAIChatModel(model, provider="openai-compatible", **options)
    raise InvalidInputError(
        f"model {spec!r}: unknown provider {provider!r} (known: {', '.join(PROVIDERS)})"
    )
