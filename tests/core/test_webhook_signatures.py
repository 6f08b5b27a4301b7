"""Webhook signatures (deuz_django.core.webhooks): HMAC-SHA256 over "<timestamp>.<body>";
a receiver refuses a forged, malformed or replayed request with a clear error."""

from __future__ import annotations

import doctest
import hashlib
import hmac

import pytest

from deuz_django.core import webhooks
from deuz_django.core.webhooks import (
    WebhookSignatureError,
    WebhookSignatureExpired,
    sign,
    verify_signature,
)

from .blocked_imports import run_without
from .test_no_django import BLOCKED

SECRET = "a-long-random-secret-for-signing-webhooks"
BODY = b'{"id":"d1","event":"run.completed","data":{"text":"\xc3\xa9t\xc3\xa9"}}'
NOW = 1_796_301_312


def signed(body: bytes = BODY, at: int = NOW) -> dict[str, str]:
    return sign(body, SECRET, delivery_id="d1", timestamp=at)


def test_the_signature_is_hmac_sha256_of_the_timestamp_and_the_body() -> None:
    headers = signed()
    expected = hmac.new(
        SECRET.encode(), f"{NOW}.".encode() + BODY, hashlib.sha256
    ).hexdigest()
    assert headers == {
        "Deuz-Webhook-Id": "d1",
        "Deuz-Webhook-Timestamp": str(NOW),
        "Deuz-Webhook-Signature": f"v1={expected}",
    }
    verify_signature(BODY, headers, SECRET, now=NOW)


def test_headers_are_read_in_any_letter_case_and_the_body_as_text_too() -> None:
    lower = {name.lower(): value for name, value in signed().items()}
    verify_signature(BODY.decode(), lower, SECRET, now=NOW + 10)


def test_any_one_of_several_signatures_may_match() -> None:
    headers = signed()
    headers["Deuz-Webhook-Signature"] = (
        f"v0=abc, v1={'0' * 64}, {headers['Deuz-Webhook-Signature']}"
    )
    verify_signature(BODY, headers, SECRET, now=NOW)


@pytest.mark.parametrize(
    ("body", "secret", "message"),
    [
        (BODY.replace(b"completed", b"failed"), SECRET, "does not match the body"),
        (BODY + b" ", SECRET, "does not match the body"),
        (BODY, SECRET + "x", "does not match the body"),
    ],
)
def test_a_changed_body_or_another_secret_is_forged(
    body: bytes, secret: str, message: str
) -> None:
    with pytest.raises(WebhookSignatureError, match=message) as raised:
        verify_signature(body, signed(), secret, now=NOW)
    assert not isinstance(raised.value, WebhookSignatureExpired)
    assert raised.value.code == "webhook_signature_invalid"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"Deuz-Webhook-Signature": None}, "Deuz-Webhook-Signature header is missing"),
        ({"Deuz-Webhook-Timestamp": None}, "Deuz-Webhook-Timestamp header is missing"),
        ({"Deuz-Webhook-Timestamp": "soon"}, "not a Unix time in seconds: 'soon'"),
        ({"Deuz-Webhook-Timestamp": "-5"}, "not a Unix time in seconds"),
        ({"Deuz-Webhook-Timestamp": "１２"}, "not a Unix time in seconds"),
        ({"Deuz-Webhook-Signature": "sha256=abc"}, "has no v1= signature"),
        ({"Deuz-Webhook-Signature": "v1="}, "does not match the body"),
        ({"Deuz-Webhook-Timestamp": str(NOW + 1)}, "does not match the body"),
    ],
)
def test_missing_or_malformed_headers_are_refused_by_name(
    change: dict[str, str | None], message: str
) -> None:
    headers = signed()
    for name, value in change.items():
        if value is None:
            del headers[name]
        else:
            headers[name] = value
    with pytest.raises(WebhookSignatureError, match=message):
        verify_signature(BODY, headers, SECRET, now=NOW)


@pytest.mark.parametrize(
    ("now", "when"), [(NOW + 301, "301 s ago"), (NOW - 301, "301 s in the future")]
)
def test_a_good_signature_outside_the_tolerance_is_a_replay(
    now: int, when: str
) -> None:
    with pytest.raises(WebhookSignatureExpired, match=when) as raised:
        verify_signature(BODY, signed(), SECRET, now=now)
    assert raised.value.code == "webhook_signature_expired"
    verify_signature(BODY, signed(), SECRET, now=now, tolerance=400)


def test_a_forged_old_request_is_reported_as_forged_not_as_a_replay() -> None:
    with pytest.raises(WebhookSignatureError) as raised:
        verify_signature(BODY + b"!", signed(), SECRET, now=NOW + 10_000)
    assert not isinstance(raised.value, WebhookSignatureExpired)


def test_the_module_docstring_example_holds() -> None:
    found = doctest.testmod(webhooks, optionflags=doctest.ELLIPSIS)
    assert (found.attempted, found.failed) == (5, 0)


def test_the_public_names_are_pinned_and_sorted() -> None:
    assert webhooks.__all__ == [
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
    assert all(getattr(webhooks, name) is not None for name in webhooks.__all__)


def test_a_receiver_verifies_without_django_installed() -> None:
    script = """
        from deuz_django.core.webhooks import sign, verify_signature

        headers = sign(b"{}", "s" * 32, delivery_id="d1")
        verify_signature(b"{}", headers, "s" * 32)
        print("verified")
    """
    completed = run_without(BLOCKED, script)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "verified"
