"""The API's JSON renderer: UTF-8 as usual, and any text renders — a lone surrogate (say,
in a model's stored output) cannot be encoded as UTF-8, so such a body is written
ASCII-escaped (``\\ud800``) instead of failing with a 500."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import JSONRenderer


class DeuzJSONRenderer(JSONRenderer):
    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        try:
            return bytes(super().render(data, accepted_media_type, renderer_context))
        except UnicodeEncodeError:
            return ASCIIJSONRenderer().render(
                data, accepted_media_type, renderer_context
            )


class ASCIIJSONRenderer(JSONRenderer):
    ensure_ascii = True
