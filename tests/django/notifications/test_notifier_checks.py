"""A misconfigured notifier is reported by ``manage.py check`` with an id and a message
naming the entry and the option; at run time it is left out, and the others still run."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.test import override_settings

from deuz_django import checks, notifications
from deuz_django.notifications.notifiers import Event
from tests.django.notify_support import EMAIL, Receiver, notifying, webhook
from tests.django.run_support import suspended

HOOK = "https://hooks.example.com/deuz"


def errors(**deuz: Any) -> list[tuple[str, str]]:
    with notifying(**deuz):
        return [(e.id, e.msg) for e in checks.check_notifiers()]


def test_a_working_configuration_passes() -> None:
    assert errors(NOTIFIERS=[EMAIL, webhook(HOOK)]) == []
    assert errors(NOTIFIERS=[]) == []


@pytest.mark.parametrize(
    ("notifiers", "message"),
    [
        (
            {"BACKEND": "deuz_django.notifications.emails.EmailNotifier"},
            "must be a list",
        ),
        (
            [["deuz_django.notifications.emails.EmailNotifier"]],
            "[0] must be a dict with a BACKEND",
        ),
        ([{"URL": HOOK}], "[0] must be a dict with a BACKEND"),
        ([{"BACKEND": "deuz_django.nope.Notifier"}], "cannot be imported"),
        ([EMAIL, {"BACKEND": "deuz_django.models.Run"}], "[1]: BACKEND 'deuz_django"),
        (
            [{"BACKEND": "deuz_django.notifications.notifiers.Notifier"}],
            "does not implement deliveries, send",
        ),
    ],
)
def test_an_entry_without_a_notifier_class_is_e020(
    notifiers: Any, message: str
) -> None:
    [(check_id, text)] = errors(NOTIFIERS=notifiers)
    assert check_id == "deuz_django.E020"
    assert message in text


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({**EMAIL, "URL": HOOK}, "unknown option 'URL' (options of EmailNotifier:"),
        ({**EMAIL, "EVENTS": ["run.completed"]}, "'run.completed' cannot be sent by"),
        ({**EMAIL, "EVENTS": "approval.requested"}, "EVENTS must be a list"),
        ({**EMAIL, "MAX_ATTEMPTS": 0}, "MAX_ATTEMPTS must be a whole number"),
        ({**EMAIL, "MAX_ATTEMPTS": True}, "MAX_ATTEMPTS must be a whole number"),
        ({**EMAIL, "FROM_EMAIL": 3}, "FROM_EMAIL must be an address"),
        (webhook(HOOK, events=["run.finished"]), "'run.finished' cannot be sent by"),
        (webhook("ftp://hooks.example.com/"), "URL must be an http:// or https://"),
        (webhook("https:///no-host"), "URL must be an http:// or https://"),
        ({**webhook(HOOK), "URL": None}, "URL must be an http:// or https://"),
        (webhook(HOOK, timeout=0), "TIMEOUT must be a number of seconds"),
        (webhook(HOOK, timeout=600), "TIMEOUT must be a number of seconds"),
    ],
)
def test_a_wrong_option_is_e021_naming_it(entry: dict[str, Any], message: str) -> None:
    [(check_id, text)] = errors(NOTIFIERS=[entry])
    assert check_id == "deuz_django.E021"
    assert text.startswith("DEUZ['NOTIFIERS'][0]")
    assert message in text


@pytest.mark.parametrize(
    ("secret", "problem"),
    [
        (None, "it is missing"),
        ("", "it is missing"),
        (12345, "it does not start with 'whsec_'"),
        # A secret of the days before Standard Webhooks, or its base64 without prefix.
        ("a-long-random-secret-of-more-than-32-chars", "does not start with 'whsec_'"),
        (base64.b64encode(bytes(range(32))).decode(), "does not start with 'whsec_'"),
        ("whsec_", "is not base64, or is empty"),
        ("whsec_a-url-safe_secret-is-not-base64", "is not base64, or is empty"),
        ("whsec_" + base64.b64encode(bytes(23)).decode(), "it holds 23 bytes"),
        ("whsec_" + base64.b64encode(bytes(65)).decode(), "it holds 65 bytes"),
    ],
)
def test_a_webhook_without_a_standard_webhooks_secret_is_e022(
    secret: Any, problem: str
) -> None:
    entry = {**webhook(HOOK), "SECRET": secret}
    if secret is None:
        del entry["SECRET"]
    [(check_id, text)] = errors(NOTIFIERS=[entry])
    assert check_id == "deuz_django.E022"
    assert "SECRET must be a Standard Webhooks secret, 'whsec_' and the base64" in text
    assert text.endswith(f"{problem}.")
    if isinstance(secret, str) and len(secret) > len("whsec_"):
        assert secret.removeprefix("whsec_") not in text  # never shown in the logs
    with notifying(entry):
        [error] = checks.check_notifiers()
    assert "secrets.token_bytes(32)" in error.hint


@pytest.mark.parametrize("size", [24, 64])
def test_a_secret_of_24_to_64_bytes_passes(size: int) -> None:
    secret = "whsec_" + base64.b64encode(bytes(range(size))).decode()
    assert errors(NOTIFIERS=[{**webhook(HOOK), "SECRET": secret}]) == []


@pytest.mark.parametrize(
    "site", [None, "", "ops.example.com", "https://ops.example.com/app", 8000]
)
def test_mail_without_a_usable_site_url_is_e023(site: Any) -> None:
    [(check_id, text)] = errors(NOTIFIERS=[EMAIL], SITE_URL=site)
    assert check_id == "deuz_django.E023"
    assert "SITE_URL" in text


def test_a_webhook_alone_needs_no_site_url() -> None:
    assert errors(NOTIFIERS=[webhook(HOOK)], SITE_URL=None) == []


@override_settings(ROOT_URLCONF="deuz_django.api.urls")
def test_links_without_the_apps_urls_routed_are_e024() -> None:
    [(check_id, text)] = errors(NOTIFIERS=[EMAIL])
    assert check_id == "deuz_django.E024"
    assert "does not include deuz_django.urls" in text


@pytest.mark.django_db
def test_a_broken_entry_is_left_out_and_the_others_still_deliver(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    run = suspended()
    entries = [{"BACKEND": "deuz_django.nope.Notifier"}, webhook(receiver.url)]
    with notifying(*entries):
        created = notifications.notify(Event("run.suspended", run))
    assert [d.status for d in created] == ["pending"]  # as created; then delivered
    assert receiver.events() == ["run.suspended"]
    assert "a notifier is left out" in caplog.text


@pytest.mark.django_db
def test_a_notifier_that_raises_is_logged_and_the_others_still_deliver(
    receiver: Receiver,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deuz_django.notifications.emails import EmailNotifier

    def broken(self: Any, event: Event) -> list[Any]:
        raise RuntimeError("template missing")

    monkeypatch.setattr(EmailNotifier, "deliveries", broken)
    run = suspended()
    with notifying(EMAIL, webhook(receiver.url)):
        notifications.notify(Event("approval.requested", run, run.approvals.first()))
    assert receiver.events() == ["approval.requested"]
    assert "EmailNotifier could not prepare approval.requested" in caplog.text
