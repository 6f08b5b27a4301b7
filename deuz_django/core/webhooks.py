"""Signed webhook requests: how deuz-django signs what it posts, and how a receiver checks it.

Pure Python, so a receiver needs only ``pip install deuz-django`` (no Django). A request
carries three headers beside its JSON body::

    Deuz-Webhook-Id: 5b0c1c2e-8f0a-4a53-9d0e-1f6f1f0f3a11
    Deuz-Webhook-Timestamp: 1796301312
    Deuz-Webhook-Signature: v1=3f2a…(64 hex digits)

The signature is ``HMAC-SHA256(secret, "<timestamp>.<body>")`` in hex, over the body's
exact bytes. Signing the timestamp with the body lets a receiver refuse a replayed
request: one whose timestamp is more than ``tolerance`` seconds away from its clock.
A request is delivered at least once: the id is the same on every retry, so receivers
drop the ids they have seen already.

>>> body = b'{"event": "run.completed"}'
>>> headers = sign(body, "s3cret", delivery_id="d1", timestamp=1796301312)
>>> verify_signature(body, headers, "s3cret", now=1796301400)
>>> verify_signature(b'{"event": "run.failed"}', headers, "s3cret", now=1796301400)
Traceback (most recent call last):
...
deuz_django.core.exceptions.WebhookSignatureError: The signature does not match ...
>>> verify_signature(body, headers, "s3cret", now=1796309999)
Traceback (most recent call last):
...
deuz_django.core.exceptions.WebhookSignatureExpired: The request was signed 8687 s ago, ...
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

from .exceptions import WebhookSignatureError, WebhookSignatureExpired

ID_HEADER = "Deuz-Webhook-Id"
TIMESTAMP_HEADER = "Deuz-Webhook-Timestamp"
SIGNATURE_HEADER = "Deuz-Webhook-Signature"
SCHEME = "v1"
DEFAULT_TOLERANCE = 300

__all__ = [
    "DEFAULT_TOLERANCE",
    "ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "WebhookSignatureError",
    "WebhookSignatureExpired",
    "sign",
    "signature",
    "verify_signature",
]


def signature(body: bytes, secret: str, timestamp: int) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under ``secret``."""
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign(
    body: bytes, secret: str, *, delivery_id: str, timestamp: int | None = None
) -> dict[str, str]:
    """The headers that sign ``body`` (``timestamp``: now, in Unix seconds)."""
    at = int(time.time()) if timestamp is None else timestamp
    return {
        ID_HEADER: delivery_id,
        TIMESTAMP_HEADER: str(at),
        SIGNATURE_HEADER: f"{SCHEME}={signature(body, secret, at)}",
    }


def verify_signature(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> None:
    """Check that ``body`` was signed with ``secret`` less than ``tolerance`` seconds
    from now (``headers`` in any letter case: Django's ``request.headers``, a dict).

    Raises :class:`WebhookSignatureError` for a missing, malformed or wrong signature,
    and :class:`WebhookSignatureExpired` for a good signature with a timestamp outside
    the tolerance (a replay). The signature is checked first: a forged request is
    reported as forged, whatever its timestamp.
    """
    raw = body.encode() if isinstance(body, str) else body
    found = {name.lower(): value for name, value in headers.items()}
    stamp = _header(found, TIMESTAMP_HEADER)
    if not stamp.isascii() or not stamp.isdigit():
        raise WebhookSignatureError(
            f"The {TIMESTAMP_HEADER} header is not a Unix time in seconds: {stamp[:40]!r}."
        )
    expected = signature(raw, secret, int(stamp))
    offered = [
        value
        for scheme, _, value in (
            item.strip().partition("=")
            for item in _header(found, SIGNATURE_HEADER).split(",")
        )
        if scheme == SCHEME
    ]
    if not offered:
        raise WebhookSignatureError(
            f"The {SIGNATURE_HEADER} header has no {SCHEME}= signature."
        )
    if not any(hmac.compare_digest(expected, value) for value in offered):
        raise WebhookSignatureError(
            "The signature does not match the body: it was forged, changed on the way, "
            "or signed with another secret."
        )
    age = (time.time() if now is None else now) - int(stamp)
    if abs(age) > tolerance:
        when = f"{age:.0f} s ago" if age >= 0 else f"{-age:.0f} s in the future"
        raise WebhookSignatureExpired(
            f"The request was signed {when}, outside the tolerance of "
            f"{tolerance:.0f} s: a replay, or a clock far off."
        )


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name.lower())
    if not value:
        raise WebhookSignatureError(f"The {name} header is missing.")
    return value.strip()
