"""System checks: every misconfiguration has an id, reported by ``manage.py check``."""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any

import pytest
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.routing import ProtocolTypeRouter, URLRouter
from django.conf import settings
from django.core.checks import run_checks
from django.core.management import call_command
from django.test import override_settings
from django.urls import path

from deuz_django import checks


def deuz(**changes: Any) -> Any:
    return override_settings(DEUZ={**settings.DEUZ, **changes})


def ids(errors: list[Any]) -> list[str]:
    return [e.id for e in errors]


@pytest.mark.django_db
def test_the_test_settings_pass_every_check() -> None:
    assert [check() for check in checks.ALL] == [[]] * len(checks.ALL)
    call_command("check", "--fail-level", "ERROR")


def test_every_check_id_is_listed_once_and_every_id_raised_is_listed() -> None:
    """Features add checks in parallel: an id two of them took would be ambiguous."""
    check_id = re.compile(r"deuz_django\.[EW]\d{3}")
    assert checks.__doc__ is not None
    listed = re.findall(rf"^({check_id.pattern}) ", checks.__doc__, re.MULTILINE)
    assert len(listed) == len(set(listed)), listed
    package = Path(checks.__file__).parent
    raised = {
        found
        for module in package.rglob("*.py")
        for found in check_id.findall(module.read_text())
    }
    assert raised == set(listed)


@pytest.mark.parametrize("secret", [None, ""])
def test_a_missing_approval_secret_is_e001(secret: Any) -> None:
    with deuz(APPROVAL_SECRET=secret):
        [error] = checks.check_approval_secret()
    assert error.id == "deuz_django.E001"
    assert "secrets.token_urlsafe(48)" in error.hint  # how to make one, as E002 says


@pytest.mark.parametrize("secret", ["short", "x" * 31, 12345])
def test_a_weak_approval_secret_is_e002(secret: Any) -> None:
    with deuz(APPROVAL_SECRET=secret):
        assert ids(checks.check_approval_secret()) == ["deuz_django.E002"]


def not_an_agent() -> str:
    return "nope"


@pytest.mark.parametrize(
    "target",
    [
        "tests.django.no_such_module.agent",
        "tests.django.agents.no_such_agent",
        "tests.django.test_checks.not_an_agent",
    ],
)
def test_an_agent_that_cannot_be_loaded_is_e003(target: str) -> None:
    with deuz(AGENTS={**settings.DEUZ["AGENTS"], "bad": target}):
        errors = checks.check_agents()
    assert ids(errors) == ["deuz_django.E003"]
    assert "'bad'" in errors[0].msg


class DeuzLikeConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    pass


DeuzLikeConsumer.__module__ = "deuz_django.streaming.consumers"


class OtherConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    pass


routed = types.ModuleType("routed")
routed.deuz = ProtocolTypeRouter(  # type: ignore[attr-defined]
    {
        "websocket": URLRouter(
            [path("ws/", URLRouter([path("x/", DeuzLikeConsumer.as_asgi())]))]
        )
    }
)
routed.other = ProtocolTypeRouter(  # type: ignore[attr-defined]
    {"websocket": URLRouter([path("ws/", OtherConsumer.as_asgi())])}
)


def test_the_project_asgi_application_routes_the_deuz_consumer() -> None:
    from django.utils.module_loading import import_string

    assert checks.routes_deuz_consumer(import_string(settings.ASGI_APPLICATION))


def test_a_routed_consumer_without_a_channel_layer_is_e004(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "routed", routed)
    with override_settings(CHANNEL_LAYERS={}):
        with override_settings(ASGI_APPLICATION="routed.deuz"):
            assert ids(checks.check_channel_layer()) == ["deuz_django.E004"]
        with override_settings(ASGI_APPLICATION="routed.other"):
            assert checks.check_channel_layer() == []
        with override_settings(ASGI_APPLICATION=None):
            assert checks.check_channel_layer() == []
    with override_settings(ASGI_APPLICATION="routed.deuz"):
        assert checks.check_channel_layer() == []  # the test settings have a layer


def test_an_asgi_application_that_is_missing_is_e009_and_one_without_the_socket_w010(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "routed", routed)
    with override_settings(ASGI_APPLICATION=None):
        assert ids(checks.check_asgi_application()) == ["deuz_django.E009"]
    with override_settings(ASGI_APPLICATION="routed.other"):
        assert ids(checks.check_asgi_application()) == ["deuz_django.W010"]
    with override_settings(ASGI_APPLICATION="routed.deuz"):
        assert checks.check_asgi_application() == []
    assert checks.check_asgi_application() == []  # the example project's asgi.py


def test_no_agent_at_all_is_e008() -> None:
    with deuz(AGENTS={}):
        assert ids(checks.check_agents()) == ["deuz_django.E008"]


@pytest.mark.parametrize(
    "limits",
    [
        {"STEP": 5},
        {"STEPS": 0},
        {"LEGS": 2.5},
        {"TOKENS": "many"},
        {"COST_USD": -1},
        {"EXECUTIONS_PER_TOOL": True},
        ["STEPS"],
    ],
)
def test_bad_run_limits_are_e011(limits: Any) -> None:
    with deuz(RUN_LIMITS=limits):
        assert ids(checks.check_run_limits()) == ["deuz_django.E011"]


def test_run_limits_may_be_switched_off_or_set() -> None:
    with deuz(RUN_LIMITS={"STEPS": None, "COST_USD": 0.5, "LEGS": 3}):
        assert checks.check_run_limits() == []


@pytest.mark.parametrize(
    "tasks",
    [
        {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}},
        {
            "default": {
                "BACKEND": "django.tasks.backends.immediate.ImmediateBackend",
                "QUEUES": ["other"],
            }
        },
        {"default": {"BACKEND": "no.such.Backend"}},
    ],
    ids=["dummy", "queue-missing", "unimportable"],
)
def test_a_task_backend_that_cannot_run_the_resume_task_is_e005(
    tasks: dict[str, Any],
) -> None:
    with override_settings(TASKS=tasks):
        assert ids(checks.check_task_backend()) == ["deuz_django.E005"]


def test_legs_run_by_the_web_server_are_w007_of_the_deploy_checks_only() -> None:
    """The test settings' immediate backend: no request waits for a leg (it is handed
    to the server's loop or a thread), but production wants workers."""
    assert ids(checks.check_legs_run_by_workers()) == ["deuz_django.W007"]

    def found(deploy: bool) -> list[str]:
        return ids(run_checks(tags=["deuz_django"], include_deployment_checks=deploy))

    assert "deuz_django.W007" in found(deploy=True)
    assert "deuz_django.W007" not in found(deploy=False)


@pytest.mark.parametrize(
    "backend", ["django_tasks_db.DatabaseBackend", "no.such.Backend"]
)
def test_a_worker_backend_or_an_unusable_one_is_not_w007(backend: str) -> None:
    """An unusable backend is E005's to report."""
    with override_settings(TASKS={"default": {"BACKEND": backend}}):
        assert checks.check_legs_run_by_workers() == []


def test_the_database_task_backend_can_run_the_resume_task() -> None:
    with override_settings(
        TASKS={"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    ):
        assert checks.check_task_backend() == []


@pytest.mark.parametrize(
    ("vendor", "psycopg3", "expected"),
    [
        ("postgresql", False, ["deuz_django.E006"]),
        ("postgresql", True, []),
        ("sqlite", False, []),
    ],
    ids=["postgresql-psycopg2", "postgresql-psycopg3", "sqlite"],
)
def test_postgresql_through_psycopg2_is_e006(
    monkeypatch: pytest.MonkeyPatch, vendor: str, psycopg3: bool, expected: list[str]
) -> None:
    import django.db
    from django.db.backends.postgresql import psycopg_any

    monkeypatch.setattr(
        django.db, "connections", {"default": types.SimpleNamespace(vendor=vendor)}
    )
    monkeypatch.setattr(psycopg_any, "is_psycopg3", psycopg3)
    assert ids(checks.check_database_driver()) == expected
