"""The API's JSON renderer: ASCII-escaped, so any text renders — even a lone surrogate
that slipped into an error message would be written as ``\\ud800``, never a 500."""

from __future__ import annotations

from rest_framework.renderers import JSONRenderer


class DeuzJSONRenderer(JSONRenderer):
    ensure_ascii = True
