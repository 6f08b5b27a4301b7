"""What was approved is what runs, across deploys: a run asked under one definition of
its tool and decided or continued under another (``mailer`` v1 → v2, see
tests/django/versioned_agents.py) shows the change to the approver, and a verdict never
runs a definition it was not given on."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client

from deuz_django import services
from deuz_django.approvals.tool_versions import (
    REMOVED,
    changes,
    definition,
    digest,
    fingerprint,
)
from deuz_django.core import Tool
from deuz_django.exceptions import NotPermitted
from deuz_django.models import Approval, ApprovalStatus, RunStatus
from deuz_django.registry import agent_tools
from tests.api.support import client, started
from tests.django.admin_support import run_url
from tests.django.processes import run_manage
from tests.django.run_support import tool_results

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def deploy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Switch this process to another deploy of ``mailer``."""

    def to(version: str) -> None:
        monkeypatch.setenv("DEUZ_TEST_MAILER_VERSION", version)
        agent_tools.cache_clear()

    to("1")
    yield to
    agent_tools.cache_clear()


def test_a_verdict_given_on_the_old_definition_never_runs_the_new_one(
    ann: User, deploy: Callable[[str], None], effects: Callable[[], list[str]]
) -> None:
    run = started(ann, agent="mailer")
    (asked,) = Approval.objects.filter(run=run)
    assert asked.tool_definition["inputSchema"]["required"] == ["to"]
    services.decide_approval(asked, user=ann, approved=True)  # decided under v1

    # The next leg runs in a process deployed with v2.
    resumed = run_manage("deuz", "resume", run.run_id, DEUZ_TEST_MAILER_VERSION="2")
    assert resumed.returncode == 0, resumed.stderr

    assert effects() == []  # neither definition ran
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    result, is_error = tool_results(run)["e1"]
    assert is_error
    assert "send_email tool changed after this call was approved" in result
    asked.refresh_from_db()
    assert asked.status == ApprovalStatus.APPROVED
    assert asked.receipt is None  # no execution on it


def test_the_approver_sees_what_a_deploy_changed_and_decides_on_the_new_definition(
    ann: User,
    make_user: Callable[..., User],
    deploy: Callable[[str], None],
    effects: Callable[[], list[str]],
) -> None:
    run = started(ann, agent="mailer")  # asked under v1
    deploy("2")
    boss = make_user("boss", superuser=True)

    shown = client(boss).get("/api/deuz/approvals/").json()["results"][0]
    assert "inputSchema.properties.cc: added" in " ".join(shown["toolChanges"])
    assert 'approvalPermission: "" → "auth.view_group"' in shown["toolChanges"]
    browser = Client()
    browser.force_login(boss)
    assert b"The tool changed since this was asked" in browser.get(run_url(run)).content
    # The owner may not approve it any more: v2 needs the finance permission.
    asked = Approval.objects.get(run=run)
    with pytest.raises(NotPermitted, match=r"auth\.view_group"):
        services.decide_approval(asked, user=ann, approved=True)

    services.decide_approval(asked, user=boss, approved=True)  # seen, decided on v2
    resumed = run_manage("deuz", "resume", run.run_id, DEUZ_TEST_MAILER_VERSION="2")
    assert resumed.returncode == 0, resumed.stderr
    assert effects() == ["v2:send_email:ann@example.com:"]
    asked.refresh_from_db()
    assert asked.receipt is not None


def test_the_run_records_its_agents_tool_fingerprint_when_it_suspends(
    ann: User, deploy: Callable[[str], None]
) -> None:
    run = started(ann, agent="mailer")
    assert run.tools_fingerprint == fingerprint(agent_tools("mailer"))
    deploy("2")
    assert run.tools_fingerprint != fingerprint(agent_tools("mailer"))


# -- definitions and their differences --------------------------------------------------


def test_changes_name_each_setting_and_schema_path_that_differs() -> None:
    before = definition(Tool(name="t", parameters={"type": "object"}))
    after = definition(
        Tool(name="t", parameters={"type": "object"}, needs_approval=True)
    )
    assert changes(before, after) == ["needsApproval: false → true"]
    assert changes(before, before) == []
    assert changes(before, None) == [REMOVED]
    assert digest(before) != digest(after)
    assert digest(None) == ""


def test_a_predicate_is_a_setting_its_code_is_not() -> None:
    def gate(args: object, ctx: object) -> bool:
        return True

    described = definition(Tool(name="t", needs_approval=gate))
    assert described is not None
    assert described["needsApproval"] == "predicate"
