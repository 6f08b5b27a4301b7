"""Mail to the people who may decide a call, through Django's mail framework.

One mail per person (:func:`deuz_django.notifications.recipients.deciders`), plain text with an HTML
alternative, with the call, its input, the run, and links to *Approve*, *Deny* and
*Open* it (:mod:`deuz_django.approvals.links`). Where the event happens only a row of the
delivery log is written (cheap: a leg does not wait for permission checks and
templates); the task that sends it settles who may decide the call and writes the
mail, keeps both in the row, and mails each person in turn. A retry — the mail server
was away — mails those not reached yet; nobody is asked once the call is decided.

Options: ``EVENTS`` (those below, all by default), ``FROM_EMAIL`` (``DEFAULT_FROM_EMAIL``
by default), ``MAX_ATTEMPTS``. The mail backend's ``timeout`` bounds an attempt
(``MAILERS["default"]["OPTIONS"]``); set it, or a mail server that never answers holds a
worker.
"""

from __future__ import annotations

import json
import smtplib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core import mail
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..approvals import links as action_links
from ..approvals.expiry import max_age
from ..models import IN_DOUBT, Approval, ApprovalKind
from ..models.deliveries import Delivery, DeliveryChannel, record_content
from ..runs.transcript import pretty
from .notifiers import (
    DEFAULT_MAX_ATTEMPTS,
    DeliveryFailed,
    Event,
    Notifier,
    NotifierConfigError,
)
from .recipients import deciders, email_of

# The events that wait for a person, and the first sentence of their mail.
INTROS = {
    "approval.requested": gettext_lazy(
        "A call waits for a person's approval before it runs."
    ),
    "question.asked": gettext_lazy("A run asks a question and waits for the answer."),
    "approval.reminder": gettext_lazy("This call is still waiting for a decision."),
    "approval.escalated": gettext_lazy(
        "This call has waited past its deadline and now goes to you too."
    ),
}


class EmailNotifier(Notifier):
    """Mail the people who may decide a waiting call (see the module docstring)."""

    channel = DeliveryChannel.EMAIL
    supported_events = tuple(INTROS)
    makes_links = True

    def __init__(
        self,
        *,
        events: Sequence[str] | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        from_email: str | None = None,
    ) -> None:
        super().__init__(events=events, max_attempts=max_attempts)
        if from_email is not None and not isinstance(from_email, str):
            raise NotifierConfigError("FROM_EMAIL must be an address.")
        self.from_email = from_email

    @property
    def timeout(self) -> float:  # type: ignore[override]
        """The mail backend's timeout (``MAILERS`` ``OPTIONS``), 0 when it has none."""
        try:
            backend = mail.mailers.default
        except Exception:  # a broken mail set-up: the attempt fails with its error
            return 0.0
        return float(getattr(backend, "timeout", None) or 0)

    def deliveries(self, event: Event) -> list[Delivery]:
        """One row per event: who is mailed, and what, is settled when it is sent."""
        approval = event.approval
        if approval is None:
            return []
        about = {"approval": approval.pk, "to": event.to}
        target = f"who may decide {approval.tool_name} ({approval.approval_id})"
        return [self.delivery(event, target, json.dumps(about))]

    def send(self, delivery: Delivery) -> None:
        """Mail each person who may decide the call, one by one; a retry mails only
        those the last attempt did not reach, and nobody once the call is decided."""
        content = json.loads(delivery.body)
        approval = (
            Approval.objects.select_related("run", "run__owner")
            .filter(pk=content["approval"])
            .first()
        )
        if approval is None or not approval.is_pending:
            content["note"] = "The call was decided before everyone was mailed."
            record_content(delivery, json.dumps(content))
            return
        if "mail" not in content:
            event = Event(
                delivery.event,
                approval.run,
                approval,
                to=content["to"],
                created_at=delivery.created_at,
            )
            people = deciders(approval, to=event.to)
            content.update(
                recipients=list(dict.fromkeys(email_of(user) for user in people)),
                sent=[],
                mail=self.message(event, approval),
            )
            record_content(
                delivery,
                json.dumps(content),
                target=", ".join(content["recipients"]) or "nobody may decide it",
            )
        for address in content["recipients"]:
            if address not in content["sent"]:
                self.send_one(content["mail"], address, delivery)
                content["sent"].append(address)
                record_content(delivery, json.dumps(content))

    def message(self, event: Event, approval: Approval) -> dict[str, str]:
        """The mail about ``event``, the same for every recipient."""
        context = mail_context(event, approval)
        return {
            "subject": subject(event, approval),
            "from": self.from_email or settings.DEFAULT_FROM_EMAIL,
            "text": render_to_string("deuz_django/email/approval.txt", context),
            "html": render_to_string("deuz_django/email/approval.html", context),
        }

    def send_one(
        self, content: dict[str, str], address: str, delivery: Delivery
    ) -> None:
        message = EmailMultiAlternatives(
            subject=content["subject"],
            body=content["text"],
            from_email=content["from"],
            to=[address],
            headers={"X-Deuz-Delivery": str(delivery.delivery_id)},
        )
        message.attach_alternative(content["html"], "text/html")
        try:
            message.send()
        except (smtplib.SMTPException, OSError) as error:
            raise DeliveryFailed(
                f"{address}: {type(error).__name__}: {error}"
            ) from error


def subject(event: Event, approval: Approval) -> str:
    run = event.run.title or event.run.run_id
    params = {"tool": approval.tool_name, "run": run}
    if event.type == "question.asked":
        text = _("A question waits for your answer: “%(run)s”")
    elif approval.kind == ApprovalKind.OUTCOME_UNKNOWN:
        text = _("Did %(tool)s happen? A crash cut it off in “%(run)s”")
    else:
        text = _("Approval needed: %(tool)s in “%(run)s”")
    prefix = {
        "approval.reminder": _("Reminder: "),
        "approval.escalated": _("Escalated: "),
    }.get(event.type, "")
    return prefix + text % params


def mail_context(event: Event, approval: Approval) -> dict[str, Any]:
    in_doubt = approval.kind == ApprovalKind.OUTCOME_UNKNOWN
    return {
        "event": event,
        "intro": IN_DOUBT if in_doubt else INTROS[event.type],
        "approval": approval,
        "run": event.run,
        "input": pretty(approval.input),
        "expires_at": expires_at(approval),
        "links": [
            (action, action_links.label(approval, action), url)
            for action, url in action_links.links(approval).items()
        ],
    }


def expires_at(approval: Approval) -> datetime | None:
    age = max_age()
    return None if age is None else approval.created_at + age
