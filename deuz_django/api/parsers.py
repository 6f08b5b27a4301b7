"""A JSON parser with a size limit and no surprises: every bad body is a clear 4xx.

Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bounds the body (413): DRF 3.18 reads JSON bodies
through ``request.body``, which checks it (the API's handler answers 413); older DRF
versions hand the parser the raw stream, so the parser checks too. Malformed, too deeply
nested or non-finite JSON is a 400, never a server error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from .exceptions import too_large


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str) -> Any:
    """JSON the way every untrusted input is read (REST bodies, WebSocket frames): finite
    numbers only, no ``NaN``/``Infinity``; a nesting bomb is a :class:`ValueError` like
    any other malformed text, never a ``RecursionError``."""
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError("nested too deeply") from None


class LimitedJSONParser(JSONParser):
    """``application/json`` bodies up to ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes."""

    def parse(
        self,
        stream: IO[bytes] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit: int | None = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = b"" if stream is None else stream.read(-1 if limit is None else limit + 1)
        if limit is not None and len(raw) > limit:
            raise too_large()
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        try:
            return loads(raw.decode(encoding))
        except (ValueError, LookupError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
