"""The ``DEUZ`` settings dict, read through one lazy object (the DRF ``api_settings`` pattern).

>>> from deuz_django.conf import deuz_settings
>>> deuz_settings.LEASE_SECONDS
30

Values are read on first access and cached; the cache is dropped when Django's
``setting_changed`` signal fires for ``DEUZ`` (``override_settings`` in tests).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

DEFAULTS: dict[str, Any] = {
    # Agent name -> dotted path of an AgentSpec (or of a callable returning one).
    "AGENTS": {},
    # The HMAC key for approval tokens; keep it secret and at least 32 characters.
    "APPROVAL_SECRET": None,
    # Earlier secrets that still verify tokens (key rotation); new tokens use the secret.
    "APPROVAL_FALLBACK_SECRETS": [],
    # Seconds an approval stays decidable; None means no expiry.
    "APPROVAL_MAX_AGE": None,
    # Seconds a leg's lease lasts without renewal (renewed every third of it).
    "LEASE_SECONDS": 30,
    # The stream journal backend (0.1 called this setting STREAM_STORE, still read).
    "STREAM_JOURNAL": "deuz_django.storage.stream_journal.DatabaseJournal",
    # Where RedisJournal keeps its lists (when STREAM_JOURNAL is
    # deuz_django.storage.stream_journal.RedisJournal).
    "STREAM_REDIS_URL": "redis://127.0.0.1:6379/0",
    # Seconds between automatic recovery sweeps; None turns every sweeper off.
    "RECOVERY_INTERVAL": 15,
    # Whether this process sweeps from the moment its apps are ready (a tasks worker's
    # settings); servers built by deuz_django.asgi sweep without it.
    "RECOVERY_SWEEPER": False,
    # Recovery attempts per run before it is marked failed (its error shows in the admin).
    "RECOVERY_MAX_ATTEMPTS": 5,
    # Seconds before the second attempt; each further attempt waits twice as long.
    "RECOVERY_BACKOFF": 5,
    # Seconds a stopping process (SIGTERM) lets its legs reach their next boundary.
    "SHUTDOWN_GRACE_SECONDS": 10,
    # Hours an owner-wide grant ("approve, and allow for my runs") may last at most.
    "GRANT_MAX_HOURS": 168,
    # Automatic decisions (standing rules, grants) in a row on one run; after these a
    # person decides the next call, so a model that keeps asking cannot loop unattended.
    "MAX_AUTOMATIC_DECISIONS": 20,
    # Limits over a whole run, across its legs (deuz_django.runs.limits): STEPS, LEGS,
    # EXECUTIONS_PER_TOOL, TOKENS, COST_USD; None switches one off. An agent may
    # override them (AgentSpec.limits).
    "RUN_LIMITS": {},
    # Days a completed run's stream journal is kept (``deuz prune`` removes older ones).
    "STREAM_RETENTION_DAYS": 7,
    # Who is told what, and how (deuz_django.notifications.notifiers): a list of entries such as
    # {"BACKEND": "deuz_django.notifications.emails.EmailNotifier"} or {"BACKEND":
    # "deuz_django.notifications.webhooks.WebhookNotifier", "URL": ..., "SECRET": ...}.
    "NOTIFIERS": [],
    # The site's address for links sent where no request exists (mails, webhooks):
    # "https://ops.example.com".
    "SITE_URL": None,
    # The REST API's authentication classes, as dotted paths; None: token (when
    # rest_framework.authtoken is installed), then session (deuz_django.api.authentication).
    "API_AUTHENTICATION_CLASSES": None,
    # Seconds an emailed Approve / Deny / Open link works.
    "ACTION_LINK_MAX_AGE": 7 * 24 * 3600,
}
IMPORT_STRINGS = frozenset({"STREAM_JOURNAL"})
# Settings renamed since 0.1: new name → old name, read when only the old one is set.
OLD_NAMES = {"STREAM_JOURNAL": "STREAM_STORE"}


class DeuzSettings:
    """Attribute access to ``settings.DEUZ`` with defaults; import strings are resolved."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        return getattr(settings, "DEUZ", {}) or {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in DEFAULTS:
            raise AttributeError(f"Invalid DEUZ setting: {name!r}")
        if name not in self._cache:
            user = self.user_settings
            value = user.get(name, user.get(OLD_NAMES.get(name, name), DEFAULTS[name]))
            if name in IMPORT_STRINGS and isinstance(value, str):
                value = import_string(value)
            self._cache[name] = value
        return self._cache[name]

    def reload(self) -> None:
        self._cache.clear()


deuz_settings = DeuzSettings()


def reload_on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver, connected in ``AppConfig.ready``."""
    if setting == "DEUZ":
        deuz_settings.reload()
