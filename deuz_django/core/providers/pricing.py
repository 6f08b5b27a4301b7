"""Per-million-token prices: the default ``price_provider`` behind ``cost_exceeds``.

>>> DEFAULT_PRICES.price_usage("gpt-4.1-mini", Usage(input_tokens=1_000_000))
0.4
>>> mine = DEFAULT_PRICES.with_prices({"llama3.1": ModelPrice(input=0.0, output=0.0)})
>>> deps = Deps(price_provider=mine)

Usage is priced as the adapters normalize it: ``input_tokens`` are the uncached prompt
tokens, and cache reads and writes are priced separately. A model id matches its own row,
else the row of its name without a ``provider:`` prefix, a ``-latest`` or a date suffix
(``claude-sonnet-4-5-20250929`` → ``claude-sonnet-4-5``). Unknown models price as ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..usage import Usage

_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrice:
    """USD per million tokens; cache prices default to the input price."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    cache_write_1h: float | None = None

    def price(self, usage: Usage) -> float:
        cache_read = self.input if self.cache_read is None else self.cache_read
        cache_write = self.input if self.cache_write is None else self.cache_write
        cache_write_1h = (
            cache_write if self.cache_write_1h is None else self.cache_write_1h
        )
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cached_read_tokens * cache_read
            + usage.cache_write_tokens * cache_write
            + usage.cache_write_1h_tokens * cache_write_1h
        ) / 1_000_000


class PriceTable:
    """A :class:`~deuz_django.core.deps.PriceProvider` over a mapping of model prices."""

    __slots__ = ("prices",)

    def __init__(self, prices: Mapping[str, ModelPrice]) -> None:
        self.prices: Mapping[str, ModelPrice] = MappingProxyType(dict(prices))

    def with_prices(self, prices: Mapping[str, ModelPrice]) -> PriceTable:
        """A copy with ``prices`` added or overriding rows of the same model id."""
        return PriceTable({**self.prices, **prices})

    def lookup(self, model_id: str) -> ModelPrice | None:
        name = model_id.split(":", 1)[-1]
        for candidate in (model_id, name, _SUFFIX.sub("", name)):
            if candidate in self.prices:
                return self.prices[candidate]
        return None

    def price_usage(self, model_id: str, usage: Usage) -> float | None:
        price = self.lookup(model_id)
        return None if price is None else price.price(usage)


def _anthropic(input: float, output: float) -> ModelPrice:
    """Anthropic's ladder: reads 0.1×, 5-minute writes 1.25×, 1-hour writes 2× input."""
    return ModelPrice(
        input=input,
        output=output,
        cache_read=input / 10,
        cache_write=input * 1.25,
        cache_write_1h=input * 2,
    )


def _openai(input: float, cached: float, output: float) -> ModelPrice:
    """OpenAI bills cache writes as ordinary input."""
    return ModelPrice(input=input, output=output, cache_read=cached)


# Published list prices (USD per million tokens, standard tier), set 2026-12-02. Prices
# change: override rows with DEFAULT_PRICES.with_prices({...}) or pass your own PriceTable.
DEFAULT_PRICES = PriceTable(
    {
        "gpt-5": _openai(1.25, 0.125, 10.0),
        "gpt-5-mini": _openai(0.25, 0.025, 2.0),
        "gpt-5-nano": _openai(0.05, 0.005, 0.40),
        "gpt-4.1": _openai(2.0, 0.50, 8.0),
        "gpt-4.1-mini": _openai(0.40, 0.10, 1.60),
        "gpt-4.1-nano": _openai(0.10, 0.025, 0.40),
        "gpt-4o": _openai(2.50, 1.25, 10.0),
        "gpt-4o-mini": _openai(0.15, 0.075, 0.60),
        "o3": _openai(2.0, 0.50, 8.0),
        "o4-mini": _openai(1.10, 0.275, 4.40),
        "claude-opus-4-5": _anthropic(5.0, 25.0),
        "claude-opus-4-1": _anthropic(15.0, 75.0),
        "claude-opus-4": _anthropic(15.0, 75.0),
        "claude-sonnet-4-6": _anthropic(3.0, 15.0),
        "claude-sonnet-4-5": _anthropic(3.0, 15.0),
        "claude-sonnet-4": _anthropic(3.0, 15.0),
        "claude-haiku-4-5": _anthropic(1.0, 5.0),
        "claude-3-5-haiku": _anthropic(0.80, 4.0),
    }
)
