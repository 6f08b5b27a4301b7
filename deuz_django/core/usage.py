"""Token usage and finish reasons (SPEC R1.6–R1.10).

The JSON form writes the optional counters (``audioTokens``, ``serverToolUses``) before
``totalTokens``, as the reference's ``sum_usage`` builds the object and ``with_total``
fills the total in. A usage read with ``from_json`` writes back what it read, counters
this runtime does not know included (:mod:`deuz_django.core._kept`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from ._jsjson import as_integer
from ._kept import keep
from .exceptions import InvalidInputError

FinishReason = Literal[
    "stop", "length", "tool_calls", "content_filter", "error", "aborted"
]
FINISH_REASONS: frozenset[str] = frozenset(get_args(FinishReason))

_COUNTERS = (
    ("input_tokens", "inputTokens"),
    ("output_tokens", "outputTokens"),
    ("reasoning_tokens", "reasoningTokens"),
    ("cached_read_tokens", "cachedReadTokens"),
    ("cache_write_tokens", "cacheWriteTokens"),
    ("cache_write_1h_tokens", "cacheWrite1hTokens"),
)
_TOTAL = ("total_tokens", "totalTokens")
_REQUIRED = (*_COUNTERS, _TOTAL)
_OPTIONAL = (("audio_tokens", "audioTokens"), ("server_tool_uses", "serverToolUses"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts of one model call, one leg, or a whole run (all integers)."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    total_tokens: int = 0
    audio_tokens: int | None = None
    server_tool_uses: int | None = None
    _json: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def to_json(self) -> dict[str, Any]:
        if self._json is not None:
            return dict(self._json)
        out = {key: getattr(self, attr) for attr, key in _COUNTERS}
        for attr, key in _OPTIONAL:
            value = getattr(self, attr)
            if value is not None:
                out[key] = value
        out[_TOTAL[1]] = self.total_tokens
        return out

    @classmethod
    def from_json(cls, data: Any, *, path: str = "usage") -> Usage:
        if isinstance(data, Usage):
            return data
        if not isinstance(data, dict):
            raise InvalidInputError(
                f"{path}: expected an object, got {type(data).__name__}"
            )
        values: dict[str, int] = {}
        for attr, key in _REQUIRED + _OPTIONAL:
            value = data.get(key)
            if value is None:  # absent, or null as JavaScript's ``?? 0`` reads it
                continue
            count = as_integer(value)
            if count is None:
                raise InvalidInputError(
                    f"{path}.{key}: expected an integer, got {value!r}"
                )
            values[attr] = count
        return keep(cls(**values), dict(data))


EMPTY_USAGE = Usage()


def sum_usage(a: Usage, b: Usage) -> Usage:
    """Add every field; the optional ones only appear when their sum is positive (R1.8)."""
    summed: dict[str, int | None] = {
        attr: getattr(a, attr) + getattr(b, attr) for attr, _ in _REQUIRED
    }
    for attr, _ in _OPTIONAL:
        total = (getattr(a, attr) or 0) + (getattr(b, attr) or 0)
        summed[attr] = total if total > 0 else None
    return Usage(**summed)  # type: ignore[arg-type]


def with_total(usage: Usage) -> Usage:
    """Fill ``total_tokens`` from input + output when the provider reported none (R1.9)."""
    if usage.total_tokens > 0:
        return usage
    return replace(usage, total_tokens=usage.input_tokens + usage.output_tokens)
