"""System checks: misconfiguration is reported by ``manage.py check``, not at first request.

deuz_django.E001  DEUZ["APPROVAL_SECRET"] is missing
deuz_django.E002  DEUZ["APPROVAL_SECRET"] is too weak (shorter than 32 characters)
deuz_django.E003  an agent in DEUZ["AGENTS"] cannot be imported or is not an AgentSpec
deuz_django.E004  Channels is installed but no CHANNEL_LAYERS is configured
deuz_django.E005  the default task backend cannot run the resume task
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error

from .conf import deuz_settings

MIN_SECRET_LENGTH = 32


def check_approval_secret(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    secret = deuz_settings.APPROVAL_SECRET
    if not secret:
        return [
            Error(
                "DEUZ['APPROVAL_SECRET'] is not set.",
                hint="Set it to a long random string kept only on the server; approval "
                "tokens are signed with it.",
                id="deuz_django.E001",
            )
        ]
    if not isinstance(secret, str) or len(secret) < MIN_SECRET_LENGTH:
        return [
            Error(
                f"DEUZ['APPROVAL_SECRET'] is weaker than {MIN_SECRET_LENGTH} characters.",
                hint="Generate one with: "
                "python -c 'import secrets; print(secrets.token_urlsafe(48))'",
                id="deuz_django.E002",
            )
        ]
    return []


def check_agents(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    from .registry import load_agent

    errors = []
    for name, path in dict(deuz_settings.AGENTS).items():
        try:
            load_agent(name)
        except Exception as error:
            errors.append(
                Error(
                    f"Agent {name!r} ({path!r}) cannot be loaded: {error}",
                    hint="DEUZ['AGENTS'] maps names to the dotted path of an AgentSpec "
                    "or of a callable returning one.",
                    id="deuz_django.E003",
                )
            )
    return errors


def check_channel_layer(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    uses_channels = {"channels", "daphne"} & set(settings.INSTALLED_APPS)
    if uses_channels and not getattr(settings, "CHANNEL_LAYERS", None):
        return [
            Error(
                "Channels is installed but CHANNEL_LAYERS is not configured.",
                hint="The WebSocket consumer fans out through the channel layer: use "
                "channels.layers.InMemoryChannelLayer in development and "
                "channels_redis in production.",
                id="deuz_django.E004",
            )
        ]
    return []


def check_task_backend(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    from django.tasks import default_task_backend
    from django.tasks.backends.dummy import DummyBackend
    from django.tasks.exceptions import InvalidTask

    from .tasks import resume_run_task

    backend = default_task_backend
    if isinstance(backend, DummyBackend):
        return [
            Error(
                "The default task backend is the DummyBackend, which never runs tasks: "
                "approved runs would never resume.",
                hint="Use django.tasks.backends.immediate.ImmediateBackend in development "
                "and a worker backend (django_tasks_db.DatabaseBackend) in production.",
                id="deuz_django.E005",
            )
        ]
    try:
        backend.validate_task(resume_run_task)
    except InvalidTask as error:
        return [
            Error(
                f"The default task backend cannot run the resume task: {error}",
                id="deuz_django.E005",
            )
        ]
    return []


ALL = (check_approval_secret, check_agents, check_channel_layer, check_task_backend)
