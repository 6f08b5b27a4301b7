"""An agent with MCP tools through the run service: a gated MCP call suspends the run, its
approval row names the server's tool (and the admin's approval queue the server), and an
approved resume calls the server (a denied one never does)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.urls import reverse
from django.utils.html import strip_tags

from deuz_django import services
from deuz_django.core.mcp import MCPTool
from deuz_django.permissions import approval_tool, decide_refusal
from tests.django.admin_support import APPROVER, QUEUE
from tests.django.admin_support import suspended_run as gated_run
from tests.django.agents import TOOL_PERMISSION
from tests.django.mcp_agents import EFFECTS
from tests.django.run_support import PROMPT, approval, tool_results

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def mcp_agent() -> Iterator[None]:
    agents = {**settings.DEUZ["AGENTS"], "mcp": "tests.django.mcp_agents.files_agent"}
    EFFECTS.unlink(missing_ok=True)
    with override_settings(DEUZ={**settings.DEUZ, "AGENTS": agents}):
        yield
    EFFECTS.unlink(missing_ok=True)


def server_effects() -> list[str]:
    return EFFECTS.read_text().splitlines() if EFFECTS.exists() else []


def suspended_run(owner: Any) -> Any:
    run = services.start_run(agent="mcp", messages=PROMPT, owner=owner)
    outcome = services.resume_run(run.run_id)
    assert outcome.status == "suspended", outcome
    return run


def test_a_gated_mcp_call_suspends_and_its_approval_names_the_server(
    make_user: Callable[..., Any],
) -> None:
    ann = make_user("ann", TOOL_PERMISSION)
    run = suspended_run(ann)

    row = approval(run, "files__delete_file")
    assert (
        row.tool_name == "files__delete_file"
    )  # the queue's Tool column names the server
    assert row.is_pending
    assert row.input == {"path": "/srv/report.txt"}
    tool = approval_tool(row)
    assert isinstance(tool, MCPTool)
    assert (tool.server, tool.remote_name) == ("files", "delete_file")
    assert server_effects() == []


def test_the_servers_approval_policy_decides_who_may_approve(
    make_user: Callable[..., Any],
) -> None:
    ann = make_user("ann")  # the owner, without the tool's approver permission
    row = approval(suspended_run(ann), "files__delete_file")

    refusal = decide_refusal(ann, row, approving=True)
    assert refusal is not None
    assert TOOL_PERMISSION in refusal
    approver = make_user(
        "fay", "deuz_django.view_run", "deuz_django.decide_approval", TOOL_PERMISSION
    )
    assert decide_refusal(approver, row, approving=True) is None


def test_an_approved_mcp_call_reaches_the_server_on_resume(
    make_user: Callable[..., Any],
) -> None:
    ann = make_user("ann", TOOL_PERMISSION)
    run = suspended_run(ann)

    decision = services.decide_approval(
        approval(run, "files__delete_file"), user=ann, approved=True
    )
    assert decision.run_ready
    outcome = services.resume_run(run.run_id, user=ann)

    assert outcome.status == "completed", outcome
    assert server_effects() == ["delete_file:/srv/report.txt"]
    assert tool_results(run)["m1"] == ("deleted /srv/report.txt", False)


def test_a_denied_mcp_call_never_reaches_the_server(
    make_user: Callable[..., Any],
) -> None:
    ann = make_user("ann", TOOL_PERMISSION)
    run = suspended_run(ann)

    services.decide_approval(
        approval(run, "files__delete_file"), user=ann, approved=False, reason="Keep it."
    )
    outcome = services.resume_run(run.run_id, user=ann)

    assert outcome.status == "completed", outcome
    assert server_effects() == []
    assert tool_results(run)["m1"] == ("Tool call denied. Reason: Keep it.", True)


def test_the_approval_queue_names_the_mcp_server_of_a_call(
    client: Client, make_user: Callable[..., Any]
) -> None:
    mcp_call = approval(suspended_run(make_user("ann")), "files__delete_file")
    gated_run(make_user("bob"))  # refund and send_email: tools of the agent's own
    client.force_login(make_user("fin", *APPROVER, staff=True))

    queue = client.get(QUEUE)

    rows = {
        row.tool_name: strip_tags(queue.context["cl"].model_admin.call(row))
        for row in queue.context["cl"].result_list
    }
    assert rows["files__delete_file"] == (
        f"files__delete_file {mcp_call.approval_id}MCP server files · delete_file"
    )
    assert "MCP server" not in rows["refund"]
    assert "MCP server <strong>files</strong>" in queue.content.decode()
    page = client.get(reverse("admin:deuz_django_approval_change", args=[mcp_call.pk]))
    assert "MCP server <strong>files</strong>" in page.content.decode()
