"""The run browser: the list (columns, filters, search), and the read-only run page with
its transcript, sub-agents, pending approvals and decision history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from django.utils.html import strip_tags

from deuz_django import services
from deuz_django.core import Deps
from deuz_django.core.testing import FunctionModel, reply
from deuz_django.core.usage import Usage
from deuz_django.models import Run
from deuz_django.registry import AgentSpec
from deuz_django.runs.continuing import join_handed_off
from tests.django.admin_support import (
    APPROVER,
    DECIDER,
    RUNS,
    VIEWER,
    approval,
    decide_url,
    run_url,
    suspended_run,
)
from tests.django.agents import TOOL_PERMISSION
from tests.django.run_support import background_leg

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]


class PerThousandTokens:
    """One cent per thousand tokens, whatever the model."""

    def price_usage(self, model_id: str, usage: Usage) -> float:
        return usage.total_tokens / 1000 * 0.01


priced = AgentSpec(
    model=FunctionModel(lambda request: reply(text="Done.", usage=(1000, 500))),
    options={"deps": Deps(price_provider=PerThousandTokens())},
)
PRICED = {
    **settings.DEUZ,
    "AGENTS": {**settings.DEUZ["AGENTS"], "priced": f"{__name__}.priced"},
}


def text(response: Any) -> str:
    return response.content.decode().replace("\xa0", " ")


def rows(response: Any) -> list[Run]:
    return list(response.context["cl"].result_list)


def test_the_list_shows_root_runs_with_their_status_pending_steps_and_tokens(
    client: Client, make_user: MakeUser
) -> None:
    gated = suspended_run(make_user("ann"), title="Refund for Ann")
    nested = suspended_run(make_user("bob"), agent="nested")
    client.force_login(make_user("root", superuser=True))

    response = client.get(RUNS)

    assert {r.pk for r in rows(response)} == {gated.pk, nested.pk}  # no sub-agent runs
    page = text(response)
    assert "Refund for Ann" in page
    assert '<span class="deuz-badge deuz-badge--suspended">suspended</span>' in page
    assert (
        '<td class="field-pending"><span class="deuz-badge deuz-badge--pending">2'
        in page
    )
    assert '<td class="field-tokens">15</td>' in page
    assert '<td class="field-cost">—</td>' in page
    assert "just now" in page


@override_settings(DEUZ=PRICED)
def test_the_cost_column_prices_runs_whose_agent_has_a_price_provider(
    client: Client, make_user: MakeUser
) -> None:
    suspended_run(make_user("ann"), agent="priced")
    client.force_login(make_user("root", superuser=True))

    page = text(client.get(RUNS))

    assert '<td class="field-cost">$0.0150</td>' in page
    assert '<td class="field-tokens">1,500</td>' in page


def test_the_list_filters_by_status_agent_owner_and_pending_and_searches(
    client: Client, make_user: MakeUser
) -> None:
    ann = make_user("ann")
    gated = suspended_run(ann, title="Refund order")
    done = suspended_run(make_user("bob"), agent="scripted", title="Say hi")
    client.force_login(make_user("viewer", *VIEWER, staff=True))

    def found(query: str) -> set[int]:
        return {r.pk for r in rows(client.get(f"{RUNS}?{query}"))}

    assert found("pending=yes") == {gated.pk}
    assert found("pending=no") == {done.pk}
    assert found("status__exact=completed") == {done.pk}
    assert found("agent=gated") == {gated.pk}
    assert found(f"owner__id__exact={ann.pk}") == {gated.pk}
    assert found("q=bob") == {done.pk}
    assert found("q=Refund") == {gated.pk}
    assert found(f"q={done.run_id}") == {done.pk}


def test_the_owner_filter_calls_runs_without_an_owner_no_owner(
    client: Client, make_user: MakeUser
) -> None:
    owned = suspended_run(make_user("ann"))
    unowned = suspended_run()
    client.force_login(make_user("viewer", *VIEWER, staff=True))

    response = client.get(RUNS)

    (owner,) = [f for f in response.context["cl"].filter_specs if f.title == "owner"]
    choices = [c["display"] for c in owner.choices(response.context["cl"])]
    assert choices == ["All", "ann", "No owner"]
    empty = [
        c for c in owner.choices(response.context["cl"]) if c["display"] == "No owner"
    ]
    page = client.get(RUNS + empty[0]["query_string"])
    assert {r.pk for r in rows(page)} == {unowned.pk}
    assert owned.pk not in {r.pk for r in rows(page)}


def test_the_run_browser_needs_the_view_run_permission(
    client: Client, make_user: MakeUser
) -> None:
    owner = make_user("ann", "deuz_django.view_approval", staff=True)
    run = suspended_run(owner)
    client.force_login(owner)

    assert client.get(RUNS).status_code == 403
    assert client.get(run_url(run)).status_code == 403


def test_runs_are_never_added_changed_or_deleted_by_hand(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("root", superuser=True))

    page = text(client.get(run_url(run)))
    assert 'name="_save"' not in page
    assert client.get(reverse("admin:deuz_django_run_add")).status_code == 403
    assert client.post(run_url(run), {"status": "completed"}).status_code == 403
    delete = reverse("admin:deuz_django_run_delete", args=[run.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert Run.objects.get(pk=run.pk).status == "suspended"


def test_the_run_page_shows_the_transcript_pending_approvals_and_history(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("fin", *APPROVER, staff=True))
    client.post(
        decide_url(approval(run, "refund")),
        {"verdict": "deny", "reason": "No.", "post": "yes"},
    )

    page = text(client.get(run_url(run)))

    assert "Refund order A-1 and email Ann." in page  # the user's text
    assert "<code>refund (r1)</code>" in page  # a tool call, with its input:
    assert (
        "{\n  &quot;order_id&quot;: &quot;A-1&quot;,\n  &quot;amount&quot;: 5\n}"
        in page
    )
    assert "1 approval pending" in page
    assert f'action="{decide_url(approval(run, "send_email"))}"' in page
    assert "Decision history" in page
    history = page[page.index("Decision history") :]
    assert "deuz-badge--denied" in history
    assert '<td data-label="By">fin</td>' in history
    assert '<td data-label="Reason">No.</td>' in history


def test_a_very_long_result_is_folded_to_its_first_lines_on_the_run_page(
    client: Client, make_user: MakeUser
) -> None:
    run = services.start_run(
        agent="verbose", messages=[{"role": "user", "content": "Report."}]
    )
    services.resume_run(run.run_id)
    client.force_login(make_user("root", superuser=True))

    page = text(client.get(run_url(run)))

    (fold,) = page.split('<div class="deuz-fold">')[1:]
    preview, full = fold.split("<details>", 1)
    assert "region-0" in preview
    assert "region-59" not in preview
    assert "Show all of it (305 lines, " in full
    assert "region-59" in full
    assert page.count('<div class="deuz-fold">') == 1  # the inputs are short enough


@background_leg
def test_the_run_page_shows_tool_errors_and_the_last_error(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("root", superuser=True))
    client.post(
        decide_url(approval(run, "refund")),
        {"verdict": "deny", "reason": "No.", "post": "yes"},
    )
    client.post(
        decide_url(approval(run, "send_email")), {"verdict": "deny", "post": "yes"}
    )
    join_handed_off()
    Run.objects.filter(pk=run.pk).update(last_error="model timed out")

    page = text(client.get(run_url(run)))

    assert "deuz-entry--tool-error" in page
    assert "Refund and email handled." in page
    assert "model timed out" in page
    assert "deuz-badge--failed" in page


def test_a_failure_recovery_retries_shows_as_retrying_with_the_next_attempt(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    Run.objects.filter(pk=run.pk).update(
        status="running",
        last_error="A checkpoint save failed: the database went away",
        recovery_attempts=1,
        recover_after=timezone.now(),
    )
    client.force_login(make_user("root", superuser=True))

    page = text(client.get(run_url(run)))

    assert "A checkpoint save failed: the database went away" in page
    assert "deuz-badge--retrying" in page
    assert "deuz-badge--failed" not in page
    assert "Retried automatically: attempt 2 of 5 after" in page


def test_a_run_recovery_gave_up_on_shows_as_failed(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    Run.objects.filter(pk=run.pk).update(
        status="running",
        last_error="Recovery gave up after 5 attempts: its process stopped mid-leg",
        recovery_attempts=5,
    )
    client.force_login(make_user("root", superuser=True))

    page = text(client.get(run_url(run)))

    assert "Recovery gave up after 5 attempts" in page
    assert "deuz-badge--failed" in page
    assert "Not retried: 5 automatic attempts were made." in page


def test_the_run_page_shows_sub_agents_with_their_path(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"), agent="nested")
    child = Run.objects.get(parent=run)
    client.force_login(make_user("root", superuser=True))

    page = text(client.get(run_url(run)))

    assert "Sub-agent researcher" in page
    assert child.run_id in page
    assert "&quot;to&quot;: &quot;bob@example.com&quot;" in page
    assert "via researcher" in page  # the pending approval's agent path
    response = client.get(run_url(child), follow=True)  # not a page of its own
    assert response.redirect_chain[-1][0] == reverse("admin:index")


@pytest.mark.parametrize(
    ("perms", "buttons", "note"),
    [
        (
            APPROVER,
            {"refund": ["approve", "deny"], "send_email": ["approve", "deny"]},
            "",
        ),
        (
            DECIDER,
            {"refund": [], "send_email": ["approve", "deny"]},
            f"Deciding refund calls needs the &#x27;{TOOL_PERMISSION}&#x27; permission.",
        ),
        (VIEWER, {"refund": [], "send_email": []}, "You may not decide approvals"),
    ],
)
def test_the_buttons_follow_what_the_viewer_may_decide(
    client: Client,
    make_user: MakeUser,
    perms: tuple[str, ...],
    buttons: dict[str, list[str]],
    note: str,
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("staff", *perms, staff=True))

    response = client.get(run_url(run))

    offered = {
        row.approval.tool_name: [
            verdict
            for verdict, allowed in (
                ("approve", row.can_approve),
                ("deny", row.can_deny),
            )
            if allowed
        ]
        for row in response.context["pending_rows"]
    }
    assert offered == buttons
    assert note in text(response)


def test_the_owner_is_offered_deny_but_not_approve_on_their_own_refund(
    client: Client, make_user: MakeUser
) -> None:
    owner = make_user("ann", *VIEWER, TOOL_PERMISSION, staff=True)
    run = suspended_run(owner)
    client.force_login(owner)

    page = text(client.get(run_url(run)))
    refund = page[page.index(f'id="approval-{approval(run, "refund").pk}"') :]
    refund = refund[: refund.index("</article>")]

    assert 'value="approve"' not in refund
    assert 'value="deny"' in refund
    assert "The run&#x27;s owner may not approve their own refund call." in refund


def test_the_decision_history_names_an_operator_override(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    services.record_operator_verdict(
        approval(run, "refund"),
        operator="Olga on call",
        approved=False,
        reason="Fraud.",
    )
    client.force_login(make_user("root", superuser=True))

    history = text(client.get(run_url(run))).split("Decision history")[1]

    assert '<td data-label="By">Olga on call (operator override)</td>' in history
    queue = text(
        client.get(reverse("admin:deuz_django_approval_changelist"), {"status": "all"})
    )
    assert "Olga on call (operator override) · " in strip_tags(queue)
