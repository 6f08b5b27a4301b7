"""Small HTML renderings the run and approval admins share: badges, times, JSON, cost.

Badges carry their text (colour is never the only signal); times are ``<time>`` elements
with the exact moment in the tooltip.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.urls import reverse
from django.utils import formats, timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from ..approvals.expiry import expiry_cutoff, is_expired
from ..core.exceptions import DeuzError
from ..core.mcp import MCPTool
from ..core.usage import Usage
from ..deadlines import escalation_label
from ..models import Approval, Run
from ..permissions import approval_tool
from ..quorum.progress import progress_of
from ..registry import agent_pricer
from ..rules.grants import Allow
from ..runs.transcript import compact, pretty

EMPTY = "—"
SUMMARY_LENGTH = (
    120  # characters of a one-line JSON summary; the stylesheet cuts it shorter
)


def badge(value: str, label: str | None = None) -> SafeString:
    """A status as coloured text; the stylesheet colours each status value."""
    return format_html(
        '<span class="deuz-badge deuz-badge--{}">{}</span>',
        value,
        label if label is not None else value,
    )


def exact_time(moment: datetime) -> str:
    return formats.date_format(timezone.localtime(moment), "DATETIME_FORMAT")


def relative_time(moment: datetime | None) -> SafeString | str:
    """``5 minutes ago`` / ``in 3 hours``, with the exact time on hover."""
    if moment is None:
        return EMPTY
    now = timezone.now()
    if abs(now - moment) < timedelta(minutes=1):
        text = _("just now")
    elif moment < now:
        text = _("%(time)s ago") % {"time": timesince(moment, now, depth=1)}
    else:
        text = _("in %(time)s") % {"time": timeuntil(moment, now, depth=1)}
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        moment.isoformat(),
        exact_time(moment),
        text,
    )


def json_block(value: Any, label: str) -> SafeString:
    return format_html(
        '<pre class="deuz-json" tabindex="0" aria-label="{}">{}</pre>',
        label,
        pretty(value),
    )


def input_changes(original: Any, edited: Any) -> list[tuple[str, str, str]]:
    """What an edit changed, field by field: ``(field, model's value, edited value)``
    as one-line JSON (``—`` where a side has no such field)."""
    if not isinstance(original, dict) or not isinstance(edited, dict):
        return [("", compact(original), compact(edited))]
    keys = [*original, *(k for k in edited if k not in original)]
    return [
        (
            str(key),
            compact(original[key]) if key in original else EMPTY,
            compact(edited[key]) if key in edited else EMPTY,
        )
        for key in keys
        if original.get(key, EMPTY) != edited.get(key, EMPTY)
        or (key in original) != (key in edited)
    ]


def input_diff(original: Any, edited: Any) -> SafeString:
    """The difference an edit made, as a small table: field, the model's value (struck
    through), the edited value."""
    rows = format_html_join(
        "",
        '<tr><th scope="row"><code>{}</code></th><td><del>{}</del></td>'
        "<td><ins>{}</ins></td></tr>",
        input_changes(original, edited),
    )
    return format_html(
        '<table class="deuz-diff"><caption>{}</caption><thead><tr><th scope="col">{}'
        '</th><th scope="col">{}</th><th scope="col">{}</th></tr></thead>'
        "<tbody>{}</tbody></table>",
        _("A person edited the input"),
        _("Field"),
        _("The model's"),
        _("Edited"),
        rows,
    )


def allowance(approval: Approval, allow: Allow) -> str:
    """What a grant asked for will approve, in words."""
    if allow.hours is None:
        return _(
            "Later %(tool)s calls on this run are approved automatically, with your "
            "rights, until the run ends or the grant is revoked."
        ) % {"tool": approval.tool_name}
    owner = approval.run.owner
    return _(
        "Later %(tool)s calls in %(owner)s's %(agent)s runs are approved "
        "automatically, with your rights, for %(hours)d hours or until the grant is "
        "revoked."
    ) % {
        "tool": approval.tool_name,
        "owner": owner.get_username() if owner else EMPTY,
        "agent": approval.run.agent,
        "hours": allow.hours,
    }


def json_summary(value: Any) -> SafeString:
    """A JSON value on one line, cut short, with the whole value pretty-printed in the
    tooltip (list columns; the object's own page shows it in full)."""
    text = compact(value)
    if len(text) > SUMMARY_LENGTH:
        text = text[: SUMMARY_LENGTH - 1] + "…"
    return format_html(
        '<code class="deuz-summary deuz-truncate" title="{}">{}</code>',
        pretty(value),
        text,
    )


def expires_at(approval: Approval) -> datetime | None:
    """When a pending approval stops being decidable (``DEUZ['APPROVAL_MAX_AGE']``)."""
    now = timezone.now()
    cutoff = expiry_cutoff(now)
    if cutoff is None or not approval.is_pending:
        return None
    return approval.created_at + (now - cutoff)


def expiry(approval: Approval) -> SafeString | str:
    moment = expires_at(approval)
    if moment is None:
        return EMPTY
    if is_expired(approval):
        return badge("expired")
    return relative_time(moment)


def countdown(moment: datetime) -> SafeString:
    """The time left until ``moment``: ``in 3 hours, 20 minutes``, ``in 40 seconds``,
    ``now`` once it passed; the exact time on hover."""
    now = timezone.now()
    seconds = int((moment - now).total_seconds())
    if seconds <= 0:
        text = _("now")
    elif seconds < 60:
        text = ngettext("in %d second", "in %d seconds", seconds) % seconds
    else:
        text = _("in %(time)s") % {"time": timeuntil(moment, now, depth=2)}
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        moment.isoformat(),
        exact_time(moment),
        text,
    )


def escalated(approval: Approval) -> SafeString | str:
    """``escalated to Finance leads``, once the call's deadline escalated it."""
    if approval.escalated_at is None:
        return ""
    return format_html(
        '<span class="deuz-badge deuz-badge--escalated" title="{}">{}</span>',
        exact_time(approval.escalated_at),
        _("escalated to %(who)s") % {"who": approval.escalated_to},
    )


def deadline(approval: Approval) -> SafeString | str:
    """A pending call's deadline: what happens then and the time left (``escalates to
    Finance leads in 3 hours``, ``times out in 20 minutes``), after whom it went to
    once escalated; ``""`` for a call without one (or decided)."""
    if not approval.is_pending or approval.deadline_at is None:
        return ""
    action = (
        _("escalates to %(who)s") % {"who": escalation_label(approval.escalate_to)}
        if approval.escalates
        else _("times out")
    )
    return format_html(
        '<span class="deuz-deadline">{}{} {}</span>',
        format_html("{} ", escalated(approval)) if approval.escalated_at else "",
        action,
        countdown(approval.deadline_at),
    )


def deadline_detail(approval: Approval) -> SafeString | str:
    """The approval page's deadline: the exact moment, then :func:`deadline` (or, once
    decided, whom it had been escalated to)."""
    if approval.deadline_at is None:
        return EMPTY
    return format_html(
        "{}<br>{}",
        exact_time(approval.deadline_at),
        deadline(approval) or escalated(approval),
    )


def reminder(approval: Approval) -> SafeString | str:
    """When the call's reminder went out, or is due."""
    if approval.reminded_at is not None:
        return format_html("{} {}", _("sent"), relative_time(approval.reminded_at))
    if approval.remind_at is None or not approval.is_pending:
        return EMPTY
    return format_html("{} {}", _("due"), countdown(approval.remind_at))


def decider(approval: Approval) -> str:
    """Who recorded the verdict (:attr:`Approval.decider`)."""
    return approval.decider


def decided_by(approval: Approval) -> SafeString | str:
    """Who recorded the verdict; an automatic decision links the rule or grant that
    made it, with an *automatic* badge."""
    automatic = approval.automatic
    if automatic is None:
        return approval.decider
    model = "standingrule" if approval.decided_by_rule_id else "grant"
    maker = automatic.created_by
    return format_html(
        '{} <a href="{}">{}</a><br><span class="deuz-muted">{} {}</span>',
        badge("automatic", _("automatic")),
        reverse(f"admin:deuz_django_{model}_change", args=[automatic.pk]),
        str(automatic),
        _("made by"),
        maker.get_username() if maker else EMPTY,
    )


def progress(approval: Approval) -> SafeString | str:
    """A chained call's "1 of 2 approvals · stage 1 of 2", who approved and who may
    still (:mod:`deuz_django.quorum`); nothing for other calls."""
    found = progress_of(approval)
    if found is None:
        return ""
    voters = ", ".join(
        by
        if behalf is None
        else _("%(by)s on behalf of %(for)s") % {"by": by, "for": behalf}
        for by, behalf in found.approvals
    )
    return format_html(
        '<br><span class="deuz-progress">{}</span>{}{}',
        found.summary,
        format_html("<br>{} {}", _("approved by"), voters) if voters else "",
        format_html("<br>{} {}", _("may still:"), ", ".join(found.may_still))
        if found.may_still
        else "",
    )


def run_cost(run: Run) -> float | None:
    """The run's price in USD, when its agent's ``deps`` carry a price provider."""
    price = agent_pricer(run.agent)
    return None if price is None else price(Usage.from_json(run.usage or {}))


def cost_label(run: Run) -> str:
    cost = run_cost(run)
    return EMPTY if cost is None else f"${cost:,.4f}"


def mcp_origin(approval: Approval) -> SafeString | str:
    """For a call of an MCP tool, the server that serves it and the tool's own name
    there (``""`` for other tools, or when the agent's tools cannot be read now)."""
    try:
        tool = approval_tool(approval)
    except DeuzError:
        return ""
    if not isinstance(tool, MCPTool):
        return ""
    return format_html(
        '<br><span class="deuz-muted">{} <strong>{}</strong> · <code>{}</code></span>',
        _("MCP server"),
        tool.server,
        tool.remote_name,
    )
