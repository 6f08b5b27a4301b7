"""A call a crash left in doubt, settled on the chat page: the customer's card asks
whether it happened, and "It happened" with the result they saw lets the run go on with
that result — the call is not run again."""

from __future__ import annotations

import json

from playwright.sync_api import Page, expect

from tests.live_site import LiveSite

from .conftest import (
    CUSTOMER,
    answered,
    approval_card,
    run_status,
    sign_in,
)

QUESTION = "Where is order A-1002?"
SEEN = {
    "order": "A-1002",
    "item": "Coffee grinder",
    "total": "89.50",
    "status": "with the courier",
    "refunded": "0.00",
}
ANSWER = "Order A-1002 (Coffee grinder, $89.50) is with the courier."


def in_doubt_run(site: LiveSite) -> str:
    """The customer's run whose first leg recorded its turn and started ``lookup_1``
    (``lookup_order``, not declared idempotent), then died: the next leg suspends on
    it as ``outcome_unknown``."""
    run_id: str = site.script(
        f"""
        from django.contrib.auth.models import User
        from deuz_django import services
        from deuz_django.core import Message, ToolUsePart
        from deuz_django.storage.step_journal import DjangoStepJournal
        run = services.start_run(
            agent="assistant",
            messages=[{{"role": "user", "content": {QUESTION!r}}}],
            owner=User.objects.get(username="customer"),
        )
        journal = DjangoStepJournal()
        call = ToolUsePart("lookup_1", "lookup_order", {{"order_id": "A-1002"}})
        journal.record_turn(run.run_id, 0, 2, Message("assistant", (call,)))
        journal.record_start(run.run_id, 0, "lookup_1")
        assert services.resume_run(run.run_id).status == "suspended"
        print(json.dumps(run.run_id))
        """
    )
    return run_id


def test_the_customer_says_it_happened_and_the_run_goes_on_with_that_result(
    chat: Page, demo_site: LiveSite
) -> None:
    run_id = in_doubt_run(demo_site)
    sign_in(chat, *CUSTOMER)
    chat.goto(f"/?run={run_id}")

    card = approval_card(chat, "lookup_order")
    expect(card.get_by_role("heading")).to_have_text("Outcome unknown: lookup_order")
    expect(card).to_contain_text("started before a crash and left no outcome")
    expect(card.get_by_role("button", name="Run it again")).to_be_visible()
    expect(card.get_by_role("button", name="Mark it failed")).to_be_visible()
    expect(card.get_by_role("button", name="Approve")).to_have_count(0)

    happened = card.get_by_role("button", name="It happened — record this result")
    card.get_by_label("Result (JSON)").fill("{not json")
    happened.click()
    expect(card.get_by_role("alert")).to_contain_text("Result: enter the call's result")
    assert (
        demo_site.script(
            f"""
        from deuz_django.models import Approval
        print(json.dumps(Approval.objects.get(run__run_id={run_id!r}).status))
        """
        )
        == "pending"
    )  # nothing was sent

    card.get_by_label("Result (JSON)").fill(json.dumps(SEEN))
    happened.click()

    expect(answered(chat, ANSWER)).to_be_visible()
    expect(card.get_by_role("heading")).to_have_text("It happened: lookup_order")
    expect(card).to_contain_text('"status": "with the courier"')
    expect(run_status(chat)).to_have_text("Answer complete")
    decided = demo_site.script(
        f"""
        from deuz_django.models import Approval
        a = Approval.objects.get(run__run_id={run_id!r})
        print(json.dumps([a.kind, a.status, a.decided_by.username]))
        """
    )
    assert decided == ["outcome_unknown", "approved", "customer"]
