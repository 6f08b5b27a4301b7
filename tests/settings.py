"""Test settings: the example project's, with the test agents registered.

DATABASE_URL switches the database (SQLite by default); REDIS_URL the channel layer;
DEUZ_LEASE_SECONDS the lease length (crash tests run their subprocess with a short one);
DEUZ_RECOVERY_INTERVAL turns on the recovery sweeper of the servers a test starts (off
otherwise) and, with DEUZ_RECOVERY_SWEEPER=1, of its workers; DEUZ_RECOVERY_BACKOFF and
DEUZ_RECOVERY_MAX_ATTEMPTS set its pace, DEUZ_SHUTDOWN_GRACE their SIGTERM grace period.
Notifications are off unless a test configures DEUZ["NOTIFIERS"] (DEUZ_TEST_NOTIFIERS:
the entries as JSON).

The test database is per process, and a file on SQLite (tests/django/databases.py).
"""

import json
import os

from example_project.settings import *  # noqa: F403
from example_project.settings import DATABASES, DEUZ, INSTALLED_APPS
from tests.django.databases import per_process_test_database

per_process_test_database(DATABASES["default"])
# The logs reach the root logger, where pytest's caplog reads them.
LOGGING = {"version": 1, "disable_existing_loggers": False}
if "django_tasks_db" not in INSTALLED_APPS:
    INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks_db"]

DEUZ = {
    **DEUZ,
    "AGENTS": {
        **DEUZ["AGENTS"],
        "scripted": "tests.django.agents.scripted",
        "slow": "tests.django.agents.slow",
        "gated": "tests.django.agents.gated",
        "forkable": "tests.django.agents.forkable",
        "nested": "tests.django.agents.nested",
        "nested_slow": "tests.django.agents.nested_slow",
        "crashy": "tests.reliability.crash_agent.crashy",
        "crashy_reconciling": "tests.reliability.crash_agent.crashy_reconciling",
        "held": "tests.django.agents.held",
        "payer": "tests.django.agents.payer",
        "reconciling": "tests.django.agents.reconciling",
        "streamer": "tests.django.stream_agents.streamer",
        "asker": "tests.django.stream_agents.asker",
        "support": "tests.django.dashboard_agents.support",
        "research": "tests.django.dashboard_agents.research",
        "verbose": "tests.e2e.agents.verbose",
        "editor": "tests.e2e.agents.editor",
        "timed": "tests.django.deadline_agents.timed",
        "timed_nested": "tests.django.deadline_agents.timed_nested",
        "twice": "tests.django.rule_agents.twice",
        "repeater": "tests.django.rule_agents.repeater",
        "timed_repeater": "tests.django.rule_agents.timed_repeater",
        "questioner": "tests.django.question_agents.questioner",
        "form_asker": "tests.django.question_agents.form_asker",
        "client_caller": "tests.django.question_agents.client_caller",
        "per_leg": "tests.django.runaway_agents.per_leg",
        "endless_asks": "tests.django.runaway_agents.endless_asks",
        "echo_forever": "tests.django.runaway_agents.echo_forever",
        "steps_bounded": "tests.django.runaway_agents.steps_bounded",
        "tokens_bounded": "tests.django.runaway_agents.tokens_bounded",
        "mailer": "tests.django.versioned_agents.mailer",
        "planned": "tests.reliability.planned_agent.planned",
        "mailing": "tests.django.replay_agents.mailing",
        "mailing_v2": "tests.django.replay_agents.mailing_v2",
        "diverging": "tests.django.replay_agents.diverging",
        "steered": "tests.reliability.steering_agent.steered",
        "pair": "tests.django.quorum_agents.pair",
        "chain": "tests.django.quorum_agents.chain",
        "agui_mailer": "tests.protocols.agents.mailer",
        **{
            name: f"tests.django.steering_agents.{name}"
            for name in (
                "echoer",
                "echoer_interrupt",
                "echoer_reject",
                "pauser",
                "pauser_interrupt",
                "pauser_reject",
                "emailer",
                "emailer_reject",
            )
        },
    },
    "LEASE_SECONDS": float(os.environ.get("DEUZ_LEASE_SECONDS", "30")),
    # Servers and workers that tests start sweep only when a test asks them to.
    "RECOVERY_INTERVAL": (
        float(os.environ["DEUZ_RECOVERY_INTERVAL"])
        if os.environ.get("DEUZ_RECOVERY_INTERVAL")
        else None
    ),
    "RECOVERY_SWEEPER": os.environ.get("DEUZ_RECOVERY_SWEEPER") == "1",
    "RECOVERY_BACKOFF": float(os.environ.get("DEUZ_RECOVERY_BACKOFF", "5")),
    "RECOVERY_MAX_ATTEMPTS": int(os.environ.get("DEUZ_RECOVERY_MAX_ATTEMPTS", "5")),
    "SHUTDOWN_GRACE_SECONDS": float(os.environ.get("DEUZ_SHUTDOWN_GRACE", "10")),
    # Notifications only where a test turns them on (for its subprocesses: as JSON).
    "NOTIFIERS": json.loads(os.environ.get("DEUZ_TEST_NOTIFIERS", "[]")),
}
# The example project's URLs and a page that is only the chat component (tests/urls.py).
ROOT_URLCONF = "tests.urls"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# A subprocess started with DEUZ_TEST_SPAN_FILE exports its spans there (tests/spans.py).
if os.environ.get("DEUZ_TEST_SPAN_FILE"):
    from tests.spans import install_file_exporter

    install_file_exporter(os.environ["DEUZ_TEST_SPAN_FILE"])
