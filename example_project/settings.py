"""Settings of the demo project: the embedded defaults, switched by environment variables.

DATABASE_URL   sqlite:///path (default: db.sqlite3 here) or postgres://user@host:port/name
REDIS_URL      redis://host:port/0 — use channels_redis instead of the in-memory layer
DEUZ_TASKS     where legs run: "db" (django-tasks-db, ``manage.py db_worker``), "rq"
               (django-tasks-rq on REDIS_URL, ``manage.py rqworker``) or "celery"
               (django-tasks-celery on CELERY_BROKER_URL, ``celery -A example_project
               worker``); otherwise the immediate backend, and the server runs legs
               itself, beside its requests (never inside one)
CELERY_BROKER_URL  the Celery broker (default: RabbitMQ, amqp://guest:guest@127.0.0.1//)
DEUZ_STREAM_JOURNAL  "redis" — keep stream journals in Redis (REDIS_URL) instead of the DB
DEUZ_LEASE_SECONDS how long a leg's lease lasts without renewal (default 30)
DEUZ_APPROVAL_SECRET   the approval signing key (a development key is used otherwise)
DEUZ_MODEL     the demo agent's model: "demo" (offline, default), "openai:<model>",
               "anthropic:<model>" or "openai-compatible:<model>" with DEUZ_MODEL_BASE_URL
DEUZ_SITE_URL  the address links in notification mails use (default: the demo's,
               http://127.0.0.1:$PORT)
DEUZ_WEBHOOK_URL, DEUZ_WEBHOOK_SECRET  also POST every event, signed, to that URL (the
               secret: "whsec_" and the base64 of 24 to 64 random bytes)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "django-insecure-deuz-demo-only")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "deuz_django",
    "example_project",
]
TASKS_BACKEND = os.environ.get("DEUZ_TASKS", "")
if TASKS_BACKEND == "db":
    INSTALLED_APPS.append("django_tasks_db")
elif TASKS_BACKEND == "rq":
    INSTALLED_APPS.append("django_rq")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
ASGI_APPLICATION = "example_project.asgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]


# Channels closes "old" connections before every message a consumer handles: with
# Django's default CONN_MAX_AGE=0 that is every message, and every leg sharing the
# connection opens a new one. Kept for a minute instead, checked before reuse.
PERSISTENT_CONNECTIONS = {"CONN_MAX_AGE": 60, "CONN_HEALTH_CHECKS": True}


def database_from_url(url: str) -> dict[str, Any]:
    """The DATABASES entry for a ``sqlite:///`` or ``postgres://`` URL."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        return sqlite_database(
            parsed.path[1:] if parsed.path.startswith("//") else parsed.path
        )
    if parsed.scheme in ("postgres", "postgresql"):
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            # Django turns psycopg's prepared statements off for transaction-pooling
            # PgBouncer; with none in between, the checkpoint save is prepared once
            # per connection (deuz_django/boundary_write.py).
            "OPTIONS": {"prepare_threshold": 5},
            **PERSISTENT_CONNECTIONS,
        }
    raise ValueError(f"DATABASE_URL: unsupported scheme {parsed.scheme!r}")


def sqlite_database(path: str | Path) -> dict[str, Any]:
    # WAL lets readers work while a leg writes; IMMEDIATE avoids lock-upgrade deadlocks.
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        },
        **PERSISTENT_CONNECTIONS,
    }


DATABASES = {
    "default": database_from_url(os.environ["DATABASE_URL"])
    if os.environ.get("DATABASE_URL")
    else sqlite_database(BASE_DIR / "db.sqlite3")
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if os.environ.get("REDIS_URL"):
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [os.environ["REDIS_URL"]]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

TASK_BACKENDS = {
    "db": {"BACKEND": "django_tasks_db.DatabaseBackend"},
    "rq": {"BACKEND": "django_tasks_rq.RQBackend"},
    "celery": {
        "BACKEND": "django_tasks_celery.CeleryBackend",
        "OPTIONS": {"CELERY_APP": "example_project.celery.app"},
    },
}
TASKS = {
    "default": TASK_BACKENDS.get(
        TASKS_BACKEND, {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}
    )
}
# django-tasks-rq: the queue "default" in Redis. django-tasks-celery: Celery's settings.
RQ_QUEUES = {
    "default": {"URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")}
}
RQ = {"JOB_CLASS": "django_tasks_rq.Job"}  # rqworker runs the tasks, not bare functions
CELERY_BROKER_URL = os.environ.get(
    "CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//"
)
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
# deuz-django reads no task results (runs keep their own state): no result backend needed.
SILENCED_SYSTEM_CHECKS = ["django_tasks_celery.W001", "django_tasks_celery.W002"]

# Notification mails: the demo prints them in the terminal that serves it. For a real
# server: {"BACKEND": "django.core.mail.backends.smtp.EmailBackend", "OPTIONS": {"host":
# ..., "timeout": 10}} (a timeout, so a mail server that never answers holds no worker).
MAILERS = {"default": {"BACKEND": "django.core.mail.backends.console.EmailBackend"}}
DEFAULT_FROM_EMAIL = "Deuz demo <deuz-demo@example.com>"
notifiers: list[dict[str, Any]] = [
    {"BACKEND": "deuz_django.notifications.emails.EmailNotifier"}
]
if os.environ.get("DEUZ_WEBHOOK_URL"):
    notifiers.append(
        {
            "BACKEND": "deuz_django.notifications.webhooks.WebhookNotifier",
            "URL": os.environ["DEUZ_WEBHOOK_URL"],
            "SECRET": os.environ.get("DEUZ_WEBHOOK_SECRET", ""),
        }
    )

DEUZ = {
    "AGENTS": {"assistant": "example_project.agents.assistant"},
    "APPROVAL_SECRET": os.environ.get(
        "DEUZ_APPROVAL_SECRET", "dev-only-approval-secret-change-me-in-production-0123"
    ),
    "APPROVAL_MAX_AGE": 24 * 3600,
    "LEASE_SECONDS": float(os.environ.get("DEUZ_LEASE_SECONDS", "30")),
    # Servers sweep by themselves (deuz_django.asgi); a worker started with
    # DEUZ_RECOVERY_SWEEPER=1 sweeps too.
    "RECOVERY_SWEEPER": os.environ.get("DEUZ_RECOVERY_SWEEPER") == "1",
    # DEUZ_STREAM_JOURNAL=redis keeps stream journals in Redis (REDIS_URL) instead of the DB.
    "STREAM_JOURNAL": "deuz_django.storage.stream_journal.RedisJournal"
    if os.environ.get("DEUZ_STREAM_JOURNAL") == "redis"
    else "deuz_django.storage.stream_journal.DatabaseJournal",
    "STREAM_REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
    "NOTIFIERS": notifiers,
    "SITE_URL": os.environ.get(
        "DEUZ_SITE_URL", f"http://127.0.0.1:{os.environ.get('PORT', '8000')}"
    ),
}

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Token first: an anonymous API request gets 401 with WWW-Authenticate. Session
    # requests (the browser) must carry the CSRF token on unsafe methods.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # The Deuz API's scopes (deuz_django.api.throttling); an empty rate turns one off.
    "DEFAULT_THROTTLE_RATES": {
        "deuz": os.environ.get("DEUZ_API_READ_RATE", "600/minute") or None,
        "deuz.write": os.environ.get("DEUZ_API_WRITE_RATE", "120/minute") or None,
    },
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

# Each log line once, under daphne too: daphne gives the root logger a handler, and
# Django's own "django" logger (the task state lines) would reach it besides its console.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        name: {"handlers": ["console"], "level": "INFO", "propagate": False}
        for name in ("django", "deuz_django")
    },
}
