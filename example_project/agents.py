"""The demo agent: a small support assistant that really uses tools.

- ``lookup_order`` and ``latest_order`` (when the customer names no order) are free;
- ``issue_refund`` needs a staff approver holding ``example_project.approve_refund``, and the
  customer who owns the run may not approve it (separation of duties); the approver may
  edit its input (say, the amount) before approving it (``editable``). A standing rule
  staff keep (``demo_setup`` makes it) approves refunds of at most $20 automatically.
  A refund left to a person has a deadline: a reminder after 15 minutes, at an hour the
  request goes to the "Finance leads" group too, and an hour later it times out — the
  customer is told, and may ask again (``DEUZ_DEMO_DEADLINE_SCALE`` shrinks those
  times, for tests);
- ``ask_human`` (built in) asks the customer a question in the chat: a customer who
  mentions store credit ("refund A-1001 or give me store credit") is asked whether the
  refund goes to the card or is store credit, and the answer goes into the refund;
- ``send_email`` is approved by the customer in the chat;
- both record their effect (a ``Refund`` / ``SentEmail`` row) under the call's idempotency
  key and reconcile against it: a call a crash left in doubt is found to have happened,
  with the answer it gave, or runs once — the demo never asks a person about one;
- ``researcher`` is a sub-agent; its ``save_note`` call is gated and bubbles up to the
  chat with the agent path ``researcher``.

The offline model (``DEUZ_MODEL=demo``, the default) is a rule-based script that reads the
conversation, so it behaves the same in any process that resumes the run. Set
``DEUZ_MODEL`` to ``openai:gpt-4.1-mini``, ``anthropic:claude-sonnet-4-5`` or
``openai-compatible:<model>`` (with ``DEUZ_MODEL_BASE_URL``) to use a real provider.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction

from deuz_django.core import (
    LanguageModel,
    Message,
    ModelRequest,
    Reconciliation,
    ToolContext,
    ToolResultPart,
    agent_tool,
    ask_human,
    tool,
)
from deuz_django.core.testing import FunctionModel, ScriptedReply, reply
from deuz_django.deadlines import TIMED_OUT, Deadline
from deuz_django.registry import AgentSpec

from .models import Order, Refund, SentEmail

SYSTEM = (
    "You are the support assistant of a small online shop. Look orders up before "
    "answering questions about them; refunds and emails need approval, so explain that "
    "you are waiting when a call is pending."
)
ORDER_NUMBER = re.compile(r"\b([A-Z]-\d{3,})\b", re.IGNORECASE)
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
AMOUNT = re.compile(r"\$\s?(\d+(?:\.\d{1,2})?)")
REFUND_METHOD = {
    "question": "Should the refund go back to your card, or be store credit?",
    "choices": ["card", "store credit"],
}
STREAM_DELAY = float(os.environ.get("DEUZ_DEMO_STREAM_DELAY", "0.03"))
DEADLINE_SCALE = float(os.environ.get("DEUZ_DEMO_DEADLINE_SCALE", "1"))


# -- tools ------------------------------------------------------------------------------------


def _facts(order: Order) -> dict[str, object]:
    return {
        "order": order.number,
        "item": order.item,
        "total": str(order.total),
        "status": order.status,
        "refunded": str(order.refunded),
    }


@tool
def lookup_order(order_id: str) -> dict[str, object]:
    """Look an order up by its number (for example A-1001)."""
    order = Order.objects.filter(number__iexact=order_id).first()
    if order is None:
        raise LookupError(f"There is no order {order_id}.")
    return _facts(order)


@tool
def latest_order() -> dict[str, object]:
    """Look up the customer's most recent order (when they name none)."""
    order = Order.objects.order_by("-number").first()
    if order is None:
        raise LookupError("There are no orders yet.")
    return _facts(order)


# A refund and an email are each recorded under the call's idempotency key (a unique
# column), in the same write as the effect. After a crash, their reconcile looks the
# record up: there, the call happened (and it tells the answer the call gave); absent, it
# did not, and runs. The unique key also makes a repeat of the same call a no-op.


def _refunded(amount: float | Decimal, order: Order) -> str:
    return f"Refunded ${amount:.2f} on {order.number}."


def _refund_made(args: dict[str, Any], ctx: ToolContext) -> Reconciliation:
    """What became of an ``issue_refund`` call a crash left in doubt."""
    refund = (
        Refund.objects.select_related("order")
        .filter(idempotency_key=ctx.idempotency_key)
        .first()
    )
    if refund is None:
        return Reconciliation.did_not_happen()
    return Reconciliation.happened(_refunded(refund.amount, refund.order))


@tool(
    needs_approval=True,
    approval_permission="example_project.approve_refund",
    approval_by_owner=False,
    reconcile=_refund_made,
    editable=True,
)
def issue_refund(order_id: str, amount: float, reason: str, ctx: ToolContext) -> str:
    """Refund an amount on an order. A finance staff member must approve it."""
    with transaction.atomic():
        order = Order.objects.select_for_update().get(number__iexact=order_id)
        _refund, created = Refund.objects.get_or_create(
            idempotency_key=ctx.idempotency_key,
            defaults={"order": order, "amount": Decimal(str(amount))},
        )
        if created:
            order.refunded = min(order.total, order.refunded + Decimal(str(amount)))
            order.status = "refunded"
            order.save(update_fields=["refunded", "status"])
    return _refunded(amount, order)


def _sent(email: SentEmail) -> str:
    return f"Email '{email.subject}' sent to {email.to}."


def _email_sent(args: dict[str, Any], ctx: ToolContext) -> Reconciliation:
    """What became of a ``send_email`` call a crash left in doubt."""
    email = SentEmail.objects.filter(idempotency_key=ctx.idempotency_key).first()
    if email is None:
        return Reconciliation.did_not_happen()
    return Reconciliation.happened(_sent(email))


@tool(needs_approval=True, reconcile=_email_sent)
def send_email(to: str, subject: str, body: str, ctx: ToolContext) -> str:
    """Send an email. The customer approves it in the chat."""
    email, _created = SentEmail.objects.get_or_create(
        idempotency_key=ctx.idempotency_key,
        defaults={"to": to, "subject": subject, "body": body},
    )
    return _sent(email)


# The help center's articles, by a word of the question that finds each.
HELP_ARTICLES = {
    "return": "Returns and refunds",
    "refund": "Returns and refunds",
    "ship": "How shipping works",
    "deliver": "How shipping works",
    "track": "Tracking an order",
}


@tool
def search_help_center(query: str) -> list[str]:
    """Search the shop's help-center articles."""
    words = query.lower()
    article = next(
        (title for word, title in HELP_ARTICLES.items() if word in words),
        "Contacting support",
    )
    return [
        "Returns are accepted within 30 days of delivery.",
        "Refunds reach the original payment method in 3–5 business days.",
        f"Top article for '{query}': '{article}'.",
    ]


@tool(needs_approval=True)
def save_note(title: str, text: str) -> str:
    """Save a research note to the customer's file (needs approval)."""
    return f"Note '{title}' saved."


# -- the offline model ------------------------------------------------------------------------


def _latest_turn(
    messages: tuple[Message, ...],
) -> tuple[str, dict[str, ToolResultPart]]:
    """The last user text, and the results of the tools called since (by tool name)."""
    names: dict[str, str] = {}
    results: dict[str, ToolResultPart] = {}
    for message in reversed(messages):
        if message.role == "user":
            return message.text, results
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                results.setdefault(part.tool_use_id, part)
            elif getattr(part, "type", "") == "tool_use":
                names[part.id] = part.name  # type: ignore[union-attr]
    return "", results


def _results_of(messages: tuple[Message, ...], name: str) -> list[ToolResultPart]:
    """The results of ``name``'s calls since the last user message, in order."""
    _text, by_id = _latest_turn(messages)
    return [
        by_id[part.id]  # type: ignore[union-attr]
        for message in messages
        for part in message.parts
        if getattr(part, "type", "") == "tool_use"
        and part.name == name  # type: ignore[union-attr]
        and part.id in by_id  # type: ignore[union-attr]
    ]


def _results_by_tool(
    messages: tuple[Message, ...],
) -> tuple[str, dict[str, ToolResultPart]]:
    text, by_id = _latest_turn(messages)
    by_name: dict[str, ToolResultPart] = {}
    for message in messages:
        for part in message.parts:
            if getattr(part, "type", "") == "tool_use" and part.id in by_id:  # type: ignore[union-attr]
                by_name[part.name] = by_id[part.id]  # type: ignore[union-attr]
    return text, by_name


def _say(text: str) -> ScriptedReply:
    words = text.split(" ")
    chunks = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
    return reply(
        text=chunks, chunk_delay=STREAM_DELAY, usage=(40 + len(text) // 4, len(words))
    )


def _call(call_id: str, name: str, arguments: dict[str, object]) -> ScriptedReply:
    return reply(tool_calls=[(call_id, name, arguments)], usage=(60, 12))


def _outcome(result: ToolResultPart) -> tuple[bool, str]:
    """Whether the call succeeded, and its text (a denial's reason included); a call a
    person edited before approving it says so (its result names the edited input)."""
    value = result.result
    edited = isinstance(value, dict) and "editedInput" in value and "result" in value
    if edited:
        value = value["result"]
    text = value if isinstance(value, str) else str(value)
    if edited:
        text += " (A staff member adjusted the request before approving it.)"
    return not result.is_error, text


def support_reply(request: ModelRequest) -> ScriptedReply:
    text, done = _results_by_tool(request.messages)
    lowered = text.lower()
    turn = sum(1 for m in request.messages if m.role == "user")
    order_match = ORDER_NUMBER.search(text)
    named = order_match.group(1).upper() if order_match else None

    if "refund" in lowered:
        if named is None:  # money never moves on a guess: ask
            return _say(
                "Which order should I refund? Tell me its number, for example "
                "'Please refund order A-1001'."
            )
        if "lookup_order" not in done:
            return _call(f"lookup_{turn}", "lookup_order", {"order_id": named})
        ok, found = _outcome(done["lookup_order"])
        if not ok:
            return _say(f"I couldn't find that order: {found}")
        # A customer who mentions store credit is asked how they want the refund.
        if "credit" in lowered and "ask_human" not in done:
            return _call(f"ask_{turn}", "ask_human", REFUND_METHOD)
        method = None
        if "ask_human" in done:
            answered, method = _outcome(done["ask_human"])
            if not answered:
                return _say(f"Understood, I won't refund it yet. ({method})")
        if "issue_refund" not in done:
            # The amount the customer names ("refund $15 on A-1003"), else the total.
            total = float(done["lookup_order"].result["total"])  # type: ignore[index]
            asked = AMOUNT.search(text)
            amount = min(total, float(asked.group(1))) if asked else total
            why = "Customer request" + (f" (as {method})" if method else "")
            return _call(
                f"refund_{turn}",
                "issue_refund",
                {"order_id": named, "amount": amount, "reason": why},
            )
        ok, outcome = _outcome(done["issue_refund"])
        if ok and method == "store credit":
            return _say(f"Good news: {outcome} It is on your account as store credit.")
        if ok:
            return _say(
                f"Good news: {outcome} It reaches your card in 3–5 business days."
            )
        if TIMED_OUT in outcome:
            return _say(
                "I'm sorry, the refund request timed out before finance decided, so "
                "no money moved. Ask me again and I'll send a new request."
            )
        return _say(f"I'm sorry, the refund was not approved. ({outcome})")

    if "email" in lowered or "mail me" in lowered:
        if named is None and "latest_order" not in done:
            return _call(f"latest_{turn}", "latest_order", {})
        if named is None:
            ok, found = _outcome(done["latest_order"])
            if not ok:
                return _say(f"I couldn't find an order to write about: {found}")
        # One email per order named ("email me about A-1001 and A-1002"), in turn.
        orders = list(dict.fromkeys(m.upper() for m in ORDER_NUMBER.findall(text)))
        orders = orders or [str(done["latest_order"].result["order"])]  # type: ignore[index]
        sent = _results_of(request.messages, "send_email")
        if sent and not _outcome(sent[-1])[0]:
            return _say(
                f"Understood, I did not send the email. ({_outcome(sent[-1])[1]})"
            )
        if len(sent) < len(orders):
            to = EMAIL.search(text)
            suffix = f"_{len(sent) + 1}" if sent else ""
            return _call(
                f"email_{turn}{suffix}",
                "send_email",
                {
                    "to": to.group(0) if to else "customer@example.com",
                    "subject": f"About your order {orders[len(sent)]}",
                    "body": "Here is the summary you asked for.",
                },
            )
        guessed = (
            ""
            if named
            else f" You didn't name an order, so I used your latest one, {orders[0]}."
        )
        outcomes = " ".join(_outcome(result)[1] for result in sent)
        return _say(f"Done — {outcomes}{guessed}")

    if "research" in lowered or "find out" in lowered:
        if "researcher" not in done:
            return _call(f"research_{turn}", "researcher", {"prompt": text})
        # The researcher's own words are on screen already, in its box: no echo.
        ok, _ = _outcome(done["researcher"])
        if not ok:
            return _say("I'm sorry, the research did not finish.")
        return _say("That is what the researcher found. Anything else?")

    if order_match or "order" in lowered:
        tool_name = "lookup_order" if named else "latest_order"
        if tool_name not in done:
            arguments = {"order_id": named} if named else {}
            return _call(f"lookup_{turn}", tool_name, arguments)
        ok, found = _outcome(done[tool_name])
        if not ok:
            return _say(f"I couldn't find that order: {found}")
        order: dict[str, str] = done[tool_name].result  # type: ignore[assignment]
        facts = f"({order['item']}, ${order['total']})"
        if named:
            return _say(f"Order {order['order']} {facts} is {order['status']}.")
        return _say(
            f"Your latest order, {order['order']} {facts}, is {order['status']}."
        )

    return _say(
        "Hi! I can look up an order (try 'Where is order A-1001?'), refund one "
        "('Please refund order A-1001'), email you a summary ('Email me the details') "
        "or research a question ('Research the return policy')."
    )


def research_reply(request: ModelRequest) -> ScriptedReply:
    text, done = _results_by_tool(request.messages)
    if "search_help_center" not in done:
        return _call("kb_1", "search_help_center", {"query": text[:80]})
    if "save_note" not in done:
        findings = " ".join(done["search_help_center"].result)
        return _call("note_1", "save_note", {"title": "Research", "text": findings})
    saved, _ = _outcome(done["save_note"])
    return _say(
        "Returns are accepted within 30 days and refunds take 3–5 business days."
        + (" I saved a note to your file." if saved else " (The note was not saved.)")
    )


# -- the agent --------------------------------------------------------------------------------


def _model(role: str) -> LanguageModel:
    choice = os.environ.get("DEUZ_MODEL", "demo")
    if choice == "demo":
        return FunctionModel(
            support_reply if role == "support" else research_reply, model_id="demo"
        )
    from deuz_django.core.providers import get_model

    base_url = os.environ.get("DEUZ_MODEL_BASE_URL")
    return get_model(choice, **({"base_url": base_url} if base_url else {}))


def assistant() -> AgentSpec:
    """Built per use: the registry calls it in whichever process runs the leg."""
    researcher = agent_tool(
        name="researcher",
        description="Researches a question in the help center and saves a note.",
        model=_model("research"),
        system="You research questions for the support assistant and save a short note.",
        tools=[search_help_center, save_note],
        max_steps=6,
    )
    return AgentSpec(
        model=_model("support"),
        tools=[
            lookup_order,
            latest_order,
            ask_human,
            issue_refund,
            send_email,
            researcher,
        ],
        system=SYSTEM,
        max_steps=8,
        deadlines={"issue_refund": refund_deadline()},
    )


def refund_deadline() -> Deadline:
    """A reminder after 15 minutes; at an hour, the Finance leads too; an hour later,
    the request times out."""

    def minutes(count: int) -> timedelta:
        return timedelta(minutes=count) * DEADLINE_SCALE

    return Deadline(
        remind_after=minutes(15),
        after=minutes(60),
        then="escalate",
        escalate_to="group:Finance leads",
        extend_by=minutes(60),
    )
