"""System checks: misconfiguration is reported by ``manage.py check``, not at first request.

deuz_django.E001  DEUZ["APPROVAL_SECRET"] is missing
deuz_django.E002  DEUZ["APPROVAL_SECRET"] is too weak (shorter than 32 characters)
deuz_django.E003  an agent in DEUZ["AGENTS"] cannot be imported or is not an AgentSpec
deuz_django.E004  the ASGI application routes the deuz consumer but no CHANNEL_LAYERS is
                  configured
deuz_django.E005  the default task backend cannot run the resume task
deuz_django.E006  a PostgreSQL database is reached through psycopg2: the checkpoint save
                  needs psycopg 3
deuz_django.W007  (``--deploy``) the task backend runs tasks where they are queued (the
                  immediate backend): legs run in the web server's processes, not a
                  worker's
deuz_django.E008  DEUZ["AGENTS"] names no agent: no run can start
deuz_django.E009  ASGI_APPLICATION is not set: the WebSocket (and runserver under
                  daphne) need the project's ASGI application
deuz_django.W010  ASGI_APPLICATION does not route the deuz WebSocket consumer
                  (deuz_django.asgi.get_asgi_application does)
deuz_django.E011  DEUZ["RUN_LIMITS"] names an unknown limit or a value that is not a
                  positive number (or None)
deuz_django.E020  DEUZ["NOTIFIERS"] is not a list, or an entry has no importable BACKEND
deuz_django.E021  a notifier's option is unknown, missing or wrong (EVENTS, URL, ...)
deuz_django.E022  a webhook notifier's SECRET is missing or not a Standard Webhooks secret
                  ("whsec_" and the base64 of 24 to 64 random bytes)
deuz_django.E023  notifications make links but DEUZ["SITE_URL"] is missing or not an origin
deuz_django.E024  notifications make links but the project does not route deuz_django.urls
deuz_django.W030  a deadline waits longer than DEUZ["APPROVAL_MAX_AGE"]: the approval
                  expires first, so the deadline (or its reminder) never comes
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.utils.module_loading import import_string

from .conf import deuz_settings
from .deadlines import duration_text

MIN_SECRET_LENGTH = 32
GENERATE_SECRET = (
    "Generate one with: python -c 'import secrets; print(secrets.token_urlsafe(48))'"
)
GENERATE_WEBHOOK_SECRET = (
    'Generate one with: python -c \'import base64, secrets; print("whsec_" + '
    "base64.b64encode(secrets.token_bytes(32)).decode())' and give your receivers "
    "the same string."
)


def check_approval_secret(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    secret = deuz_settings.APPROVAL_SECRET
    if not secret:
        return [
            Error(
                "DEUZ['APPROVAL_SECRET'] is not set.",
                hint="Set it to a long random string kept only on the server; approval "
                f"tokens are signed with it. {GENERATE_SECRET}",
                id="deuz_django.E001",
            )
        ]
    if not isinstance(secret, str) or len(secret) < MIN_SECRET_LENGTH:
        return [
            Error(
                f"DEUZ['APPROVAL_SECRET'] is weaker than {MIN_SECRET_LENGTH} characters.",
                hint=GENERATE_SECRET,
                id="deuz_django.E002",
            )
        ]
    return []


def check_agents(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    from .registry import load_agent

    if not deuz_settings.AGENTS:
        return [
            Error(
                "DEUZ['AGENTS'] names no agent, so no run can start.",
                hint="Map a name to the dotted path of an AgentSpec, or of a callable "
                "returning one: DEUZ = {'AGENTS': {'assistant': "
                "'myproject.agents.assistant'}}.",
                id="deuz_django.E008",
            )
        ]
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


def routes_deuz_consumer(app: Any, depth: int = 0) -> bool:
    """Whether an ASGI application (Channels routers and middleware) reaches a consumer
    of this package: ``as_asgi()`` apps carry ``consumer_class``, routers their routes,
    middleware the application it wraps."""
    if app is None or depth > 32:
        return False
    consumer = getattr(app, "consumer_class", None)
    if consumer is not None:
        return str(consumer.__module__).startswith("deuz_django.")
    mapping = getattr(app, "application_mapping", None)
    if isinstance(mapping, dict):
        return any(routes_deuz_consumer(a, depth + 1) for a in mapping.values())
    routes = getattr(app, "routes", None)
    if isinstance(routes, list | tuple):
        return any(
            routes_deuz_consumer(getattr(r, "callback", None), depth + 1)
            for r in routes
        )
    inner = getattr(app, "inner", None) or getattr(app, "application", None)
    return routes_deuz_consumer(inner, depth + 1)


def check_asgi_application(
    app_configs: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    path = getattr(settings, "ASGI_APPLICATION", None)
    if not path:
        return [
            Error(
                "ASGI_APPLICATION is not set.",
                hint="The chat's WebSocket needs the project's ASGI application: in "
                "asgi.py, application = deuz_django.asgi.get_asgi_application(); in the "
                "settings, ASGI_APPLICATION = 'mysite.asgi.application'.",
                id="deuz_django.E009",
            )
        ]
    try:
        application = import_string(path)
    except Exception:  # an ASGI module that does not import is reported when served
        return []
    if routes_deuz_consumer(application):
        return []
    return [
        Warning(
            f"{path} does not route the deuz WebSocket consumer: the chat and other "
            "socket clients cannot connect.",
            hint="Use deuz_django.asgi.get_asgi_application() (pass your own socket "
            "routes as websocket_urlpatterns=[...]), or include "
            "deuz_django.routing.websocket_urlpatterns in your URLRouter.",
            id="deuz_django.W010",
        )
    ]


def check_run_limits(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    from .runs.limits import settings_problem

    problem = settings_problem(deuz_settings.RUN_LIMITS, "DEUZ['RUN_LIMITS']")
    if problem is None:
        return []
    return [
        Error(
            problem,
            hint="Keys: STEPS, LEGS, EXECUTIONS_PER_TOOL, TOKENS, COST_USD; None switches "
            "one off.",
            id="deuz_django.E011",
        )
    ]


def check_channel_layer(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    path = getattr(settings, "ASGI_APPLICATION", None)
    if not path or getattr(settings, "CHANNEL_LAYERS", None):
        return []
    try:
        application = import_string(path)
    except Exception:  # an ASGI module that does not import is reported when served
        return []
    if not routes_deuz_consumer(application):
        return []
    return [
        Error(
            f"{path} routes the deuz WebSocket consumer but CHANNEL_LAYERS is not "
            "configured.",
            hint="The consumer fans out and listens for cancels through the channel "
            "layer: use channels.layers.InMemoryChannelLayer in development and "
            "channels_redis in production.",
            id="deuz_django.E004",
        )
    ]


def check_task_backend(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    from django.tasks import task_backends
    from django.tasks.backends.dummy import DummyBackend
    from django.tasks.exceptions import InvalidTask, InvalidTaskBackend

    from .runs.tasks import run_claimed_leg_task

    try:
        backend = task_backends[run_claimed_leg_task.backend]
    except InvalidTaskBackend as error:
        return [
            Error(
                f"The task backend for the resume task is unusable: {error}",
                hint="Check TASKS['default'] in the settings.",
                id="deuz_django.E005",
            )
        ]
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
        backend.validate_task(run_claimed_leg_task)
    except InvalidTask as error:
        return [
            Error(
                f"The default task backend cannot run the resume task: {error}",
                id="deuz_django.E005",
            )
        ]
    return []


def check_legs_run_by_workers(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """A deploy check: with the immediate backend no request waits for a leg (it is
    handed to the server's event loop or a thread:
    :func:`~deuz_django.runs.continuing.hand_off`), but legs share the web server's
    processes, and end with them."""
    from django.tasks.exceptions import InvalidTaskBackend

    from .runs.tasks import runs_in_caller

    try:
        if not runs_in_caller():
            return []
    except InvalidTaskBackend:  # deuz_django.E005 says why
        return []
    return [
        Warning(
            "The default task backend runs tasks where they are queued: agent legs run "
            "in the web server's processes, beside its requests, instead of in a task "
            "worker.",
            hint="Use a worker backend in production, e.g. "
            "django_tasks_db.DatabaseBackend with 'manage.py db_worker' (the docs' "
            "production.md, 'Task workers: which backend when').",
            id="deuz_django.W007",
        )
    ]


def check_database_driver(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    from django.db import connections

    errors = []
    for alias in connections:
        if connections[alias].vendor != "postgresql":
            continue
        from django.db.backends.postgresql.psycopg_any import is_psycopg3

        if not is_psycopg3:
            errors.append(
                Error(
                    f"DATABASES[{alias!r}] reaches PostgreSQL through psycopg2; "
                    "deuz_django's checkpoint save binds its arrays in binary and "
                    "needs psycopg 3.",
                    hint="pip install 'deuz-django[postgres]' (psycopg 3); Django "
                    "prefers it over psycopg2 when both are installed.",
                    id="deuz_django.E006",
                )
            )
    return errors


def check_notifiers(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    from .notifications.notifiers import NotifierConfigError, entries, load_notifier

    try:
        configured = entries()
    except NotifierConfigError as error:
        return [Error(str(error), id=error.check_id)]
    errors, notifiers = [], []
    for index, entry in enumerate(configured):
        try:
            notifiers.append(load_notifier(index, entry))
        except NotifierConfigError as error:
            hint = HINTS.get(error.check_id, NOTIFIERS_HINT)
            errors.append(Error(str(error), hint=hint, id=error.check_id))
    if any(n.makes_links for n in notifiers) or deuz_settings.SITE_URL:
        errors += _link_errors()
    return errors


NOTIFIERS_HINT = (
    "See the docs' notifications.md: each entry is a dict with a BACKEND and its "
    "options in capitals."
)
HINTS = {"deuz_django.E022": GENERATE_WEBHOOK_SECRET}


def _link_errors() -> list[Error]:
    from django.urls import NoReverseMatch, reverse

    from .approvals.links import ROUTE, site_url_problem

    problem = site_url_problem(deuz_settings.SITE_URL)
    if problem is not None:
        return [
            Error(
                problem,
                hint="Set DEUZ['SITE_URL'] to the address people reach the site at.",
                id="deuz_django.E023",
            )
        ]
    try:
        reverse(ROUTE, kwargs={"token": "x"})
    except NoReverseMatch:
        return [
            Error(
                "Notifications link to the approval pages, but the URLconf does not "
                "include deuz_django.urls.",
                hint='Add path("deuz/", include("deuz_django.urls")) to your urls.py.',
                id="deuz_django.E024",
            )
        ]
    return []


def check_deadlines(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from .registry import agent_deadlines

    seconds = deuz_settings.APPROVAL_MAX_AGE
    if seconds is None:
        return []
    max_age = timedelta(seconds=float(seconds))
    warnings: list[CheckMessage] = []
    for name in deuz_settings.AGENTS:
        try:
            rules = agent_deadlines(name)
        except Exception:  # deuz_django.E003 says why
            continue
        for label, deadline in rules.named():
            if deadline.longest_wait <= max_age:
                continue
            warnings.append(
                Warning(
                    f"Agent {name!r}: {label} lets a call wait "
                    f"{duration_text(deadline.longest_wait)}, longer than "
                    f"DEUZ['APPROVAL_MAX_AGE'] ({duration_text(max_age)}).",
                    hint="The approval expires at APPROVAL_MAX_AGE first (its run "
                    "continues with 'Approval expired.'), so this deadline never comes: "
                    "shorten it or raise APPROVAL_MAX_AGE.",
                    id="deuz_django.W030",
                )
            )
    return warnings


ALL = (
    check_approval_secret,
    check_agents,
    check_asgi_application,
    check_run_limits,
    check_channel_layer,
    check_task_backend,
    check_database_driver,
    check_notifiers,
    check_deadlines,
)
# Run by ``manage.py check --deploy`` only.
DEPLOY = (check_legs_run_by_workers,)
