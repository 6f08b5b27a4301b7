"""Links in notifications that lead a person to a call: *Approve*, *Deny* and *Open*.

A link is the site's address (``DEUZ["SITE_URL"]``: mails are written in a task, where
no request says which host to use) and a token signed with Django's
:mod:`~django.core.signing` (the project's ``SECRET_KEY``, its fallbacks for rotation, a
salt of its own and a timestamp) that names the approval and the action::

    https://ops.example.com/deuz/approvals/act/<payload>:<signed at>:<signature>/

    payload: {"a": 42, "i": "r1", "x": "approve"} (the approval's pk and id, the action)

A link works for ``DEUZ["ACTION_LINK_MAX_AGE"]`` seconds. It grants nothing by itself:
opening it shows a confirmation page (:mod:`deuz_django.approvals.link_views`), mail scanners
open links, and only a POST from that page, by a signed-in user who may decide the call,
records a verdict. Forwarding a mail forwards no right to decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.core import signing
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from ..conf import deuz_settings
from ..models import Approval, ApprovalKind

SALT = "deuz_django.approvals.links"
ROUTE = "deuz_django:approval-action"
# What each action does to the call (``open`` shows it with every verdict offered).
VERDICTS = {"approve": True, "deny": False}
ACTIONS = (*VERDICTS, "open")
# The kinds of approval a link decides; others (a question) are only opened.
DECIDED_BY_LINK = frozenset({ApprovalKind.APPROVAL, ApprovalKind.OUTCOME_UNKNOWN})
LABELS = {"approve": _("Approve"), "deny": _("Deny"), "open": _("Open")}
# A call a crash left in doubt is answered in the admin's words; so is a question.
IN_DOUBT_LABELS = {**LABELS, "approve": _("Run it again"), "deny": _("Mark it failed")}
QUESTION_LABELS = {**LABELS, "approve": _("Answer"), "deny": _("Decline to answer")}


@dataclass(frozen=True, slots=True)
class ActionLink:
    """What a verified token names."""

    approval_pk: int
    approval_id: str
    action: str

    @property
    def verdicts(self) -> tuple[str, ...]:
        """The verdicts the link's page offers."""
        return tuple(VERDICTS) if self.action == "open" else (self.action,)


def make_token(approval: Approval, action: str) -> str:
    if action not in ACTIONS:
        raise ValueError(f"action: {action!r} is not one of {', '.join(ACTIONS)}")
    payload = {"a": approval.pk, "i": approval.approval_id, "x": action}
    return signing.dumps(payload, salt=SALT)


def read_token(token: str) -> ActionLink:
    """The link ``token`` names; raises :class:`~django.core.signing.SignatureExpired`
    for a link older than ``ACTION_LINK_MAX_AGE`` and
    :class:`~django.core.signing.BadSignature` for a forged, changed or cut one."""
    max_age = deuz_settings.ACTION_LINK_MAX_AGE
    payload = signing.loads(token, salt=SALT, max_age=max_age)
    if not (
        isinstance(payload, dict)
        and type(payload.get("a")) is int
        and isinstance(payload.get("i"), str)
        and payload.get("x") in ACTIONS
    ):
        raise signing.BadSignature("The link's content is not an action link.")
    return ActionLink(payload["a"], payload["i"], payload["x"])


def link(approval: Approval, action: str) -> str:
    """The absolute URL of ``action`` on ``approval``."""
    path = reverse(ROUTE, kwargs={"token": make_token(approval, action)})
    return site_url() + path


def links(approval: Approval) -> dict[str, str]:
    """The links a notification about ``approval`` carries, by action."""
    actions = ACTIONS if approval.kind in DECIDED_BY_LINK else ("open",)
    return {action: link(approval, action) for action in actions}


def label(approval: Approval, action: str) -> str:
    """What a button or link doing ``action`` on ``approval`` says."""
    labels = {
        ApprovalKind.OUTCOME_UNKNOWN: IN_DOUBT_LABELS,
        ApprovalKind.QUESTION: QUESTION_LABELS,
    }.get(ApprovalKind(approval.kind), LABELS)
    return str(labels[action])


def site_url() -> str:
    """``DEUZ["SITE_URL"]`` without a trailing slash; raises ``ImproperlyConfigured``
    when it is missing or not an origin (``deuz_django.E023`` says so at start)."""
    value = deuz_settings.SITE_URL
    problem = site_url_problem(value)
    if problem is not None:
        raise ImproperlyConfigured(problem)
    return str(value).rstrip("/")


def site_url_problem(value: object) -> str | None:
    """Why ``value`` cannot be the ``SITE_URL`` (``None``: it can)."""
    if not value:
        return "DEUZ['SITE_URL'] is not set: links in notifications need the site's address."
    if not isinstance(value, str):
        return "DEUZ['SITE_URL'] must be a string such as 'https://ops.example.com'."
    parts = urlsplit(value)
    if (
        parts.scheme not in ("http", "https")
        or not parts.netloc
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        return (
            f"DEUZ['SITE_URL'] = {value!r} is not a site's address: give the scheme "
            "and host only, such as 'https://ops.example.com' (a path prefix comes "
            "from FORCE_SCRIPT_NAME)."
        )
    return None
