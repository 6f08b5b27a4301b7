"""Signed webhook requests (the Standard Webhooks scheme): how deuz-django signs what it
posts, and how a receiver checks it.

Pure Python, so a receiver needs only ``pip install deuz-django`` (no Django). A request
carries three headers beside its JSON body::

    webhook-id: 5b0c1c2e-8f0a-4a53-9d0e-1f6f1f0f3a11
    webhook-timestamp: 1796301312
    webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=

The signature is the base64 of ``HMAC-SHA256(key, "<id>.<timestamp>.<body>")``, over the
body's exact bytes; the key is the bytes a secret ``whsec_<base64>`` stands for. Signing
the id and the timestamp with the body lets a receiver refuse a captured request sent
again: under a new id the signature fails, and under its own id the receiver has seen it
already (the id is the same on every retry, so receivers drop the ids they have seen),
or its timestamp is more than ``tolerance`` seconds away. Any Standard Webhooks library
verifies these requests with the same secret; of several signatures, space-separated,
one matching is enough (as when a sender rotates its secret).

>>> secret = "whsec_c2lnbmluZy1rZXktb2YtdGhlLWRvY3N0cmluZy0wMDE="
>>> body = b'{"event": "run.completed"}'
>>> headers = sign(body, secret, delivery_id="d1", timestamp=1796301312)
>>> headers["webhook-signature"]
'v1,hrsBZ0FOJq5wmuq/Lcv6VgXvqfsqImiO6xRtoX2vk5A='
>>> verify_signature(body, headers, secret, now=1796301400)
>>> verify_signature(body, {**headers, "webhook-id": "d2"}, secret, now=1796301400)
Traceback (most recent call last):
...
deuz_django.core.exceptions.WebhookSignatureError: The signature does not match ...
>>> verify_signature(body, headers, secret, now=1796309999)
Traceback (most recent call last):
...
deuz_django.core.exceptions.WebhookSignatureExpired: The request was signed 8687 s ago, ...
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping

from .exceptions import (
    InvalidInputError,
    WebhookSignatureError,
    WebhookSignatureExpired,
)

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
SECRET_PREFIX = "whsec_"
SCHEME = "v1"
DEFAULT_TOLERANCE = 300

__all__ = [
    "DEFAULT_TOLERANCE",
    "ID_HEADER",
    "SECRET_PREFIX",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "WebhookSignatureError",
    "WebhookSignatureExpired",
    "secret_key",
    "sign",
    "verify_signature",
]


def secret_key(secret: str) -> bytes:
    """The HMAC key ``secret`` stands for: the bytes that its base64 (standard alphabet,
    padding optional) encodes, after an optional ``whsec_`` prefix.

    Raises :class:`InvalidInputError` for a secret that is not base64 or holds no bytes;
    the message never repeats the secret.
    """
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error:
        raise InvalidInputError(
            f"The webhook secret is not a Standard Webhooks secret: '{SECRET_PREFIX}' "
            "followed by base64 (A–Z, a–z, 0–9, '+', '/')."
        ) from None
    if not key:
        raise InvalidInputError("The webhook secret holds no bytes.")
    return key


def sign(
    body: bytes, secret: str, *, delivery_id: str, timestamp: int | None = None
) -> dict[str, str]:
    """The headers that sign ``body`` as delivery ``delivery_id`` (``timestamp``: now, in
    Unix seconds). The id may not contain ``.``: it would blur where it ends."""
    if not delivery_id or "." in delivery_id:
        raise InvalidInputError(
            f"A webhook delivery id must be non-empty, without '.': {delivery_id!r}."
        )
    at = str(int(time.time()) if timestamp is None else timestamp)
    signature = _signature(secret_key(secret), delivery_id, at, body)
    return {
        ID_HEADER: delivery_id,
        TIMESTAMP_HEADER: at,
        SIGNATURE_HEADER: f"{SCHEME},{signature}",
    }


def verify_signature(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> None:
    """Check that ``body`` was signed with ``secret`` (``whsec_<base64>``), under the
    request's id, less than ``tolerance`` seconds from now (``headers`` in any letter
    case: Django's ``request.headers``, a dict).

    Raises :class:`WebhookSignatureError` for a missing or malformed header and for a
    signature that does not match (a forged or changed body, a new id), and
    :class:`WebhookSignatureExpired` for a good signature with a timestamp outside the
    tolerance (a replay); :class:`InvalidInputError` for a ``secret`` that is not one.
    The signature is checked first: a forged request is reported as forged, whatever
    its timestamp. Dropping the ids already seen is the caller's.
    """
    raw = body.encode() if isinstance(body, str) else body
    found = {name.lower(): value for name, value in headers.items()}
    delivery_id = _header(found, ID_HEADER)
    if "." in delivery_id:
        raise WebhookSignatureError(f"The {ID_HEADER} header may not contain '.'.")
    stamp = _header(found, TIMESTAMP_HEADER)
    if not stamp.isascii() or not stamp.isdigit():
        raise WebhookSignatureError(
            f"The {TIMESTAMP_HEADER} header is not a Unix time in seconds: {stamp[:40]!r}."
        )
    offered = [
        value
        for scheme, _, value in (
            item.partition(",") for item in _header(found, SIGNATURE_HEADER).split()
        )
        if scheme == SCHEME
    ]
    if not offered:
        raise WebhookSignatureError(
            f"The {SIGNATURE_HEADER} header has no {SCHEME} signature "
            f"('{SCHEME},<base64>', space-separated)."
        )
    expected = _signature(secret_key(secret), delivery_id, stamp, raw).encode()
    if not any(hmac.compare_digest(expected, value.encode()) for value in offered):
        raise WebhookSignatureError(
            "The signature does not match the id, timestamp and body: the request was "
            "forged, changed on the way (or sent again under a new id), or signed with "
            "another secret."
        )
    # Only a signed timestamp gets here, so it is a number its sender chose to send.
    age = (time.time() if now is None else now) - int(stamp)
    if abs(age) > tolerance:
        when = f"{age:.0f} s ago" if age >= 0 else f"{-age:.0f} s in the future"
        raise WebhookSignatureExpired(
            f"The request was signed {when}, outside the tolerance of "
            f"{tolerance:.0f} s: a replay, or a clock far off."
        )


def _signature(key: bytes, delivery_id: str, timestamp: str, body: bytes) -> str:
    message = f"{delivery_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.digest(key, message, hashlib.sha256)).decode()


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if not value or not value.strip():
        raise WebhookSignatureError(f"The {name} header is missing.")
    return value.strip()
