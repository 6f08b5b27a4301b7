"""SDK exceptions → the core's :class:`~deuz_django.core.exceptions.ModelError` tree.

Both official SDKs share one exception vocabulary (``APIStatusError``, ``APITimeoutError``,
``APIConnectionError``, ``APIError``), so one mapping serves both::

    APIStatusError 429                          → RateLimitError (status_code 429)
    APIStatusError other                        → ModelHTTPError (status_code)
    an error event inside a 200 stream          → by its type: rate_limit_error →
                                                  RateLimitError, overloaded_error →
                                                  ModelHTTPError(529)…; unknown → ModelError
    APITimeoutError, httpx2.TimeoutException    → ModelTimeoutError
    APIConnectionError, httpx2.TransportError   → ModelConnectionError
    event data that is not JSON (or not UTF-8)  → MalformedEventError

Every message is the provider's own, with key-like substrings redacted. The Anthropic SDK
lets transport errors inside a stream through unwrapped, hence the ``httpx2`` classes.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from ..exceptions import (
    DeuzError,
    MalformedEventError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    ProviderNotInstalledError,
    RateLimitError,
)
from ..wire import redact

# The status an error ``type`` (Anthropic) or ``code`` (OpenAI) stands for, used when the
# error arrives as an event inside a 200 stream.
_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "overloaded_error": 529,
}
_MAX_MESSAGE = 500


def require_sdk(module: str, *, provider: str, extra: str) -> ModuleType:
    """Import an optional SDK, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ProviderNotInstalledError(
            f"The {provider!r} provider needs the {module!r} package, which is not "
            f'installed: pip install "deuz-django[{extra}]"'
        ) from exc


def map_error(exc: Exception, *, sdk: ModuleType, provider: str) -> Exception:
    """The core error for ``exc`` raised while calling ``sdk``; unknown errors pass through."""
    if isinstance(exc, DeuzError):
        return exc
    httpx2 = importlib.import_module("httpx2")  # both SDKs' transport
    if isinstance(exc, sdk.APIStatusError):
        return _status_error(exc, provider)
    if isinstance(exc, sdk.APITimeoutError | httpx2.TimeoutException):
        return ModelTimeoutError(f"{provider}: request timed out", provider=provider)
    if isinstance(exc, sdk.APIConnectionError | httpx2.TransportError):
        cause = exc.__cause__ if isinstance(exc, sdk.APIConnectionError) else exc
        detail = f" ({cause})" if cause is not None and str(cause) else ""
        return ModelConnectionError(
            redact(f"{provider}: connection failed{detail}"), provider=provider
        )
    if isinstance(exc, sdk.APIError):
        message, kind = _body_message(exc.body)
        return _typed_error(provider, message or str(exc), kind, status=None)
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return MalformedEventError(
            redact(f"{provider}: unreadable stream event ({exc})"), provider=provider
        )
    return exc


def _status_error(exc: Any, provider: str) -> ModelError:
    message, kind = _body_message(exc.body)
    status: int = exc.status_code
    # Below 400 it is an error event inside a successful stream: typed by its ``type``.
    return _typed_error(
        provider, message or str(exc), kind, status=status if status >= 400 else None
    )


def _typed_error(
    provider: str, message: str, kind: str | None, *, status: int | None
) -> ModelError:
    if status is None:
        status = _TYPE_STATUS.get(kind or "")
        label = f"{provider}: stream error"
    else:
        label = f"{provider}: HTTP {status}"
    if kind:
        label += f" ({kind})"
    text = redact(f"{label}: {message[:_MAX_MESSAGE]}")
    if status is None:
        return ModelError(text, provider=provider)
    if status == 429:
        return RateLimitError(text, provider=provider, status_code=status)
    return ModelHTTPError(text, provider=provider, status_code=status)


def _body_message(body: object) -> tuple[str, str | None]:
    """The provider's own message and error type from an error body (either SDK's shape)."""
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            message = error.get("message")
            kind = error.get("type") or error.get("code")
            return (
                message if isinstance(message, str) else "",
                kind if isinstance(kind, str) else None,
            )
    if isinstance(body, str):
        return body.strip(), None
    return "", None


def malformed(provider: str, exc: Exception) -> MalformedEventError:
    """An event whose shape the adapter cannot read (the SDKs construct without checks)."""
    return MalformedEventError(
        redact(f"{provider}: unexpected event shape ({exc})"), provider=provider
    )


def expect_str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def expect_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def expect_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value
