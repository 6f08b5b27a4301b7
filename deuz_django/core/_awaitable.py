"""Accept sync or async callables alike at the seams users implement (stores, hooks)."""

from __future__ import annotations

import inspect
from typing import Any


async def resolve(value: Any) -> Any:
    """Await ``value`` if it is awaitable, else return it unchanged."""
    if inspect.isawaitable(value):
        return await value
    return value
