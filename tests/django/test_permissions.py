"""Who may see, decide and resume — asked through the run service, as every entry point does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from deuz_django import permissions, services
from deuz_django.core.testing.contracts import make_checkpoint
from deuz_django.exceptions import ApprovalNotFound, NotPermitted, RunNotFound
from deuz_django.models import Approval, Run
from deuz_django.storage.store import DjangoSessionStore
from tests.django.agents import TOOL_PERMISSION
from tests.django.run_support import PROMPT, approval, suspended

pytestmark = pytest.mark.django_db

VIEW = "deuz_django.view_run"
DECIDE = "deuz_django.decide_approval"
RESUME = "deuz_django.resume_run"


@pytest.fixture
def people(make_user: Callable[..., Any]) -> dict[str, Any]:
    return {
        "owner": make_user("ann"),
        "owner_finance": make_user("fay", TOOL_PERMISSION),
        "stranger": make_user("sam"),
        "viewer": make_user("vic", VIEW, staff=True),
        "decider": make_user("dan", VIEW, DECIDE, staff=True),
        "finance": make_user("fin", VIEW, DECIDE, TOOL_PERMISSION, staff=True),
        "resumer": make_user("ray", VIEW, RESUME, staff=True),
        "blind_decider": make_user("bea", DECIDE, staff=True),
        "superuser": make_user("root", superuser=True),
        "anonymous": AnonymousUser(),
    }


def decide(user: Any, row: Approval, approved: bool = True) -> str:
    """The outcome of one decision attempt, as an entry point would report it."""
    try:
        services.decide_approval(row, user=user, approved=approved)
    except NotPermitted:
        return "forbidden"
    except ApprovalNotFound:
        return "not found"
    Approval.objects.filter(pk=row.pk).update(status="pending", decided_at=None)
    row.refresh_from_db()
    return "decided"


@pytest.mark.parametrize(
    ("who", "email", "refund"),
    [
        ("owner", "decided", "forbidden"),  # the refund tool needs a permission
        ("stranger", "not found", "not found"),  # other users' runs are invisible
        ("viewer", "forbidden", "forbidden"),  # seeing is not deciding
        ("decider", "decided", "forbidden"),  # deciding others' runs, but no refunds
        ("finance", "decided", "decided"),
        ("blind_decider", "not found", "not found"),  # may decide only what it sees
        ("superuser", "decided", "decided"),
        ("anonymous", "forbidden", "forbidden"),
    ],
)
def test_who_may_approve_which_call(
    people: dict[str, Any], who: str, email: str, refund: str
) -> None:
    run = suspended(owner=people["owner"])
    assert decide(people[who], approval(run, "send_email")) == email
    assert decide(people[who], approval(run, "refund")) == refund


def test_the_owner_never_approves_a_separation_of_duties_call_but_may_deny_it(
    people: dict[str, Any],
) -> None:
    # refund has approval_by_owner=False: even an owner holding its permission may not.
    run = suspended(owner=people["owner_finance"])
    refund = approval(run, "refund")
    assert decide(people["owner_finance"], refund, approved=True) == "forbidden"
    assert decide(people["owner_finance"], refund, approved=False) == "decided"
    assert decide(people["finance"], refund, approved=True) == "decided"


def test_a_call_whose_tool_is_gone_may_only_be_denied(people: dict[str, Any]) -> None:
    run = suspended(owner=people["owner"])
    row = approval(run, "send_email")
    Approval.objects.filter(pk=row.pk).update(tool_name="retired_tool")
    row.refresh_from_db()
    assert decide(people["superuser"], row, approved=True) == "forbidden"
    assert decide(people["superuser"], row, approved=False) == "decided"


@pytest.mark.parametrize(
    ("who", "outcome"),
    [
        ("owner", "resumed"),
        ("resumer", "resumed"),
        ("superuser", "resumed"),
        ("viewer", "forbidden"),
        ("decider", "forbidden"),
        ("stranger", "not found"),
        ("anonymous", "forbidden"),
    ],
)
def test_who_may_resume_a_run(people: dict[str, Any], who: str, outcome: str) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT, owner=people["owner"])
    try:
        services.resume_run(run.run_id, user=people[who])
    except NotPermitted:
        result = "forbidden"
    except RunNotFound:
        result = "not found"
    else:
        result = "resumed"
    assert result == outcome
    run.refresh_from_db()
    assert run.status == ("completed" if outcome == "resumed" else "running")


def test_for_user_lists_the_root_runs_a_user_may_see(people: dict[str, Any]) -> None:
    mine = services.start_run(agent="scripted", messages=PROMPT, owner=people["owner"])
    theirs = services.start_run(
        agent="scripted", messages=PROMPT, owner=people["stranger"]
    )
    DjangoSessionStore().save(make_checkpoint(f"{mine.run_id}::helper#c1"))
    visible = {
        who: set(Run.objects.for_user(people[who]).values_list("run_id", flat=True))
        for who in ("owner", "stranger", "viewer", "decider", "anonymous")
    }
    assert visible == {
        "owner": {mine.run_id},
        "stranger": {theirs.run_id},
        "viewer": {mine.run_id, theirs.run_id},
        "decider": {mine.run_id, theirs.run_id},
        "anonymous": set(),
    }


def test_approvals_for_user_follow_the_runs_they_see(people: dict[str, Any]) -> None:
    run = suspended(owner=people["owner"])
    suspended(owner=people["stranger"])
    assert set(Approval.objects.for_user(people["owner"])) == set(run.approvals.all())
    assert Approval.objects.for_user(people["viewer"]).pending().count() == 4
    assert not Approval.objects.for_user(people["anonymous"]).exists()


def test_a_deactivated_owner_may_do_nothing(people: dict[str, Any]) -> None:
    owner = people["owner"]
    run = suspended(owner=owner)
    owner.is_active = False
    owner.save()
    assert not permissions.can_view_run(owner, run)
    assert not permissions.is_signed_in(owner)
    assert decide(owner, approval(run, "send_email")) == "forbidden"


def test_an_agent_without_the_tool_leaves_only_denial_even_when_unregistered(
    people: dict[str, Any],
) -> None:
    run = suspended(owner=people["owner"])
    agents = {k: v for k, v in settings.DEUZ["AGENTS"].items() if k != "gated"}
    with override_settings(DEUZ={**settings.DEUZ, "AGENTS": agents}):
        row = approval(run, "send_email")
        assert permissions.approval_tool(row) is None
        assert decide(people["owner"], row, approved=True) == "forbidden"
