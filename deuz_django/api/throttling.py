"""Rate limits for the API, configured in ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``.

Two scopes: ``"deuz"`` for reads and ``"deuz.write"`` for starting runs, posting verdicts and
resuming (each may start a model call). A scope without a rate is not throttled, so the app
needs no configuration; the project's own throttle classes still apply on top::

    REST_FRAMEWORK = {"DEFAULT_THROTTLE_RATES": {"deuz": "600/minute", "deuz.write": "60/minute"}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

READ_SCOPE = "deuz"
WRITE_SCOPE = "deuz.write"


class DeuzRateThrottle(SimpleRateThrottle):
    """Per user (per address when anonymous), by scope: reads, or writes."""

    def __init__(self) -> None:
        # The rate depends on the request's method, so it is read in allow_request (from
        # the current settings, unlike DRF's throttles, which read them at import).
        pass

    def allow_request(self, request: Any, view: Any) -> bool:
        self.scope = READ_SCOPE if request.method in SAFE_METHODS else WRITE_SCOPE
        # Rates are "N/period" strings; the DRF stubs type them as numbers.
        rates = cast("Mapping[str, str | None]", api_settings.DEFAULT_THROTTLE_RATES)
        self.rate = rates.get(self.scope)
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)

    def get_cache_key(self, request: Any, view: Any) -> str:
        user = request.user
        ident = user.pk if user and user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}
