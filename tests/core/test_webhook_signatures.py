"""Webhook signatures (deuz_django.core.webhooks), the Standard Webhooks scheme: base64
HMAC-SHA256 over "<id>.<timestamp>.<body>"; a receiver refuses a forged, malformed or
replayed request, and one sent again under a new id, with a clear error."""

from __future__ import annotations

import base64
import doctest
import hashlib
import hmac
from datetime import UTC, datetime

import pytest
import standardwebhooks

from deuz_django.core import webhooks
from deuz_django.core.exceptions import InvalidInputError
from deuz_django.core.webhooks import (
    WebhookSignatureError,
    WebhookSignatureExpired,
    secret_key,
    sign,
    verify_signature,
)

from .blocked_imports import run_without
from .test_no_django import BLOCKED

KEY = b"a-core-test-secret-of-32-bytes!!"
SECRET = "whsec_" + base64.b64encode(KEY).decode()
BODY = b'{"id":"d1","event":"run.completed","data":{"text":"\xc3\xa9t\xc3\xa9"}}'
NOW = 1_796_301_312


def signed(body: bytes = BODY, at: int = NOW) -> dict[str, str]:
    return sign(body, SECRET, delivery_id="d1", timestamp=at)


def test_the_signature_is_base64_hmac_sha256_of_the_id_timestamp_and_body() -> None:
    digest = hmac.new(KEY, f"d1.{NOW}.".encode() + BODY, hashlib.sha256).digest()
    assert signed() == {
        "webhook-id": "d1",
        "webhook-timestamp": str(NOW),
        "webhook-signature": f"v1,{base64.b64encode(digest).decode()}",
    }
    verify_signature(BODY, signed(), SECRET, now=NOW)


def test_the_standard_webhooks_library_verifies_what_sign_makes() -> None:
    headers = sign(BODY, SECRET, delivery_id="msg_2KWPBgLlAfxdpx2AI54pPJ85f4W")
    assert standardwebhooks.Webhook(SECRET).verify(BODY, headers) == {
        "id": "d1",
        "event": "run.completed",
        "data": {"text": "été"},
    }


def test_verify_signature_accepts_what_the_standard_webhooks_library_signs() -> None:
    at = datetime.fromtimestamp(NOW, UTC)
    value = standardwebhooks.Webhook(SECRET).sign("msg_1", at, BODY)
    headers = {
        "Webhook-Id": "msg_1",
        "Webhook-Timestamp": str(NOW),
        "Webhook-Signature": value,
    }
    verify_signature(BODY, headers, SECRET, now=NOW)


def test_a_captured_request_sent_again_under_a_new_id_is_refused() -> None:
    replayed = {**signed(), "webhook-id": "d2"}
    with pytest.raises(WebhookSignatureError, match="does not match the id") as raised:
        verify_signature(BODY, replayed, SECRET, now=NOW)
    assert not isinstance(raised.value, WebhookSignatureExpired)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(SECRET).verify(
            BODY, {**sign(BODY, SECRET, delivery_id="d1"), "webhook-id": "d2"}
        )


def test_headers_are_read_in_any_letter_case_and_the_body_as_text_too() -> None:
    upper = {name.upper(): value for name, value in signed().items()}
    verify_signature(BODY.decode(), upper, SECRET, now=NOW + 10)


def test_any_one_of_several_space_separated_signatures_may_match() -> None:
    headers = signed()
    other = base64.b64encode(bytes(32)).decode()
    headers["webhook-signature"] = (
        f"v1a,{other} v1,{other}  {headers['webhook-signature']}"
    )
    verify_signature(BODY, headers, SECRET, now=NOW)


@pytest.mark.parametrize(
    "secret",
    [
        SECRET.removeprefix("whsec_"),  # the prefix is optional, as in the standard
        SECRET.rstrip("="),  # and so is the base64 padding
    ],
)
def test_a_secret_is_its_base64_with_or_without_prefix_and_padding(
    secret: str,
) -> None:
    assert secret_key(secret) == KEY
    verify_signature(BODY, signed(), secret, now=NOW)


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("whsec_not base64!", "not a Standard Webhooks secret"),
        ("whsec_a-url-safe_alphabet", "not a Standard Webhooks secret"),
        ("whsec_abcde", "not a Standard Webhooks secret"),
        ("whsec_", "holds no bytes"),
        ("", "holds no bytes"),
    ],
)
def test_a_secret_that_is_not_base64_is_invalid_input_never_echoed(
    secret: str, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message) as raised:
        verify_signature(BODY, signed(), secret, now=NOW)
    encoded = secret.removeprefix("whsec_")
    assert not encoded or encoded not in str(raised.value)
    with pytest.raises(InvalidInputError, match=message):
        sign(BODY, secret, delivery_id="d1")


@pytest.mark.parametrize(
    ("body", "secret"),
    [
        (BODY.replace(b"completed", b"failed"), SECRET),
        (BODY + b" ", SECRET),
        (BODY, "whsec_" + base64.b64encode(KEY[::-1]).decode()),
    ],
)
def test_a_changed_body_or_another_secret_is_forged(body: bytes, secret: str) -> None:
    with pytest.raises(WebhookSignatureError, match="does not match the id") as raised:
        verify_signature(body, signed(), secret, now=NOW)
    assert not isinstance(raised.value, WebhookSignatureExpired)
    assert raised.value.code == "webhook_signature_invalid"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"webhook-id": None}, "webhook-id header is missing"),
        ({"webhook-id": "  "}, "webhook-id header is missing"),
        ({"webhook-id": "d1.1796301312"}, r"may not contain '\.'"),
        ({"webhook-signature": None}, "webhook-signature header is missing"),
        ({"webhook-timestamp": None}, "webhook-timestamp header is missing"),
        ({"webhook-timestamp": "soon"}, "not a Unix time in seconds: 'soon'"),
        ({"webhook-timestamp": "-5"}, "not a Unix time in seconds"),
        ({"webhook-timestamp": "１２"}, "not a Unix time in seconds"),
        ({"webhook-timestamp": "9" * 5000}, "does not match the id"),
        ({"webhook-timestamp": str(NOW + 1)}, "does not match the id"),
        ({"webhook-signature": "sha256=abc"}, "has no v1 signature"),
        ({"webhook-signature": "v1=abc"}, "has no v1 signature"),
        ({"webhook-signature": "v1,"}, "does not match the id"),
        ({"webhook-signature": "v1,***"}, "does not match the id"),
        ({"webhook-signature": "v1,étè"}, "does not match the id"),
    ],
)
def test_missing_or_malformed_headers_are_refused_by_name(
    change: dict[str, str | None], message: str
) -> None:
    headers: dict[str, str] = signed()
    for name, value in change.items():
        if value is None:
            del headers[name]
        else:
            headers[name] = value
    with pytest.raises(WebhookSignatureError, match=message):
        verify_signature(BODY, headers, SECRET, now=NOW)


@pytest.mark.parametrize("delivery_id", ["", "d.1"])
def test_sign_refuses_an_id_that_would_blur_the_signed_text(delivery_id: str) -> None:
    with pytest.raises(InvalidInputError, match=r"without '\.'"):
        sign(BODY, SECRET, delivery_id=delivery_id)


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
    assert (found.attempted, found.failed) == (7, 0)


def test_the_public_names_are_pinned_and_sorted() -> None:
    assert webhooks.__all__ == [
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
    assert all(getattr(webhooks, name) is not None for name in webhooks.__all__)


def test_a_receiver_verifies_without_django_installed() -> None:
    script = f"""
        from deuz_django.core.webhooks import sign, verify_signature

        headers = sign(b"{{}}", "{SECRET}", delivery_id="d1")
        verify_signature(b"{{}}", headers, "{SECRET}")
        print("verified")
    """
    completed = run_without(BLOCKED, script)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "verified"
