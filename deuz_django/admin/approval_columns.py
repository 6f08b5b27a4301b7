"""What the approval queue and an approval's own page show: the admin's columns and
read-only fields of an :class:`~deuz_django.models.Approval` (how a call is decided is
:mod:`.approvals`)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..approvals.expiry import is_expired
from ..approvals.questions import question_of
from ..models import IN_DOUBT, Approval, ApprovalKind, Run
from . import display


def run_page(run: Run) -> str:
    return reverse("admin:deuz_django_run_change", args=[run.pk])


class ApprovalColumns:
    """The display methods the approval admin lists and shows."""

    # -- the queue's columns ----------------------------------------------------------------

    @admin.display(description=gettext_lazy("call"), ordering="tool_name")
    def call(self, obj: Approval) -> str:
        """The tool, the call's id, the MCP server that serves the tool (if one does),
        "outcome unknown" for a call a crash left in doubt and — for a sub-agent's
        call — the asking agent."""
        via = (
            format_html(
                '<br><span class="deuz-muted">{}</span>',
                _("via %s") % obj.agent_path_label,
            )
            if obj.agent_path
            else ""
        )
        kind = (
            format_html("<br>{}", display.badge(obj.kind, obj.get_kind_display()))
            if obj.kind == ApprovalKind.OUTCOME_UNKNOWN
            else ""
        )
        return format_html(
            '<strong>{}</strong> <code class="deuz-muted">{}</code>{}{}{}',
            obj.tool_name,
            obj.approval_id,
            display.mcp_origin(obj),
            kind,
            via,
        )

    @admin.display(description=gettext_lazy("input"))
    def call_input(self, obj: Approval) -> str:
        """The call's input; for a question, what it asks (and its answer, once given)."""
        question = question_of(obj)
        if question is None:
            return display.json_summary(obj.input)
        answered = (
            format_html("<br>{} {}", _("Answer:"), display.json_summary(obj.answer))
            if obj.answer is not None
            else ""
        )
        return format_html(
            '<span class="deuz-question">{}</span>{}', question.text, answered
        )

    @admin.display(description=gettext_lazy("run"), ordering="run__run_id")
    def run_link(self, obj: Approval) -> str:
        """The run's title (cut short; whole in the tooltip), its owner and short id."""
        run = obj.run
        owner = run.owner.get_username() if run.owner else _("no owner")
        return format_html(
            '<a class="deuz-truncate" href="{}#approval-{}" title="{}">{}</a>'
            '<span class="deuz-muted">{} · <code>{}…</code></span>',
            run_page(run),
            obj.pk,
            f"{run.title}\n{run.run_id}" if run.title else run.run_id,
            run.title or run.run_id,
            owner,
            run.run_id[:8],
        )

    @admin.display(description=gettext_lazy("status"), ordering="status")
    def status_badge(self, obj: Approval) -> str:
        """The status; for a pending call how old it is and when it expires, for a
        decided one who recorded the verdict, when and why."""
        status = display.badge(obj.status, obj.get_status_display())
        if obj.is_pending:
            moment = display.expires_at(obj)
            if moment is None:
                expires: Any = ""
            elif is_expired(obj):
                expires = format_html("<br>{}", display.badge("expired"))
            else:
                expires = format_html(
                    "<br>{} {}", _("expires"), display.relative_time(moment)
                )
            deadline = display.deadline(obj)
            return format_html(
                '{}<span class="deuz-when"><br>{} {}{}{}</span>{}',
                status,
                _("asked"),
                display.relative_time(obj.created_at),
                expires,
                format_html("<br>{}", deadline) if deadline else "",
                display.progress(obj),
            )
        escalated = display.escalated(obj)
        return format_html(
            '<span class="deuz-decided">{}{}<span class="deuz-when"><br>{} · {}</span>{}'
            "</span>",
            status,
            format_html(" {}", escalated) if escalated else "",
            display.decided_by(obj),
            display.relative_time(obj.decided_at),
            format_html(
                '<span class="deuz-truncate" title="{}">{}</span>',
                obj.reason,
                obj.reason,
            )
            if obj.reason
            else "",
        )

    # -- the approval's own page ------------------------------------------------------------

    @admin.display(description=gettext_lazy("tool"))
    def tool(self, obj: Approval) -> str:
        return format_html(
            '<strong>{}</strong> <code class="deuz-muted">{}</code>{}',
            obj.tool_name,
            obj.approval_id,
            display.mcp_origin(obj),
        )

    @admin.display(description=gettext_lazy("kind"))
    def kind_label(self, obj: Approval) -> str:
        """The kind; for a call a crash left in doubt, what that means."""
        if obj.kind != ApprovalKind.OUTCOME_UNKNOWN:
            return str(obj.get_kind_display())
        return format_html(
            '{}<p class="deuz-explain">{}</p>',
            display.badge(obj.kind, obj.get_kind_display()),
            IN_DOUBT,
        )

    @admin.display(description=gettext_lazy("input"))
    def full_input(self, obj: Approval) -> str:
        return display.json_block(obj.input, _("Input of %s") % obj.tool_name)

    @admin.display(description=gettext_lazy("edited input"))
    def edited(self, obj: Approval) -> str:
        """The input a person approved the call with, as the difference it made."""
        if obj.edited_input is None:
            return display.EMPTY
        return format_html(
            "{}{}",
            display.input_diff(obj.input, obj.edited_input),
            display.json_block(obj.edited_input, _("Edited input")),
        )

    @admin.display(description=gettext_lazy("question"))
    def asked(self, obj: Approval) -> str:
        """What a question tool's call asks: its text, and its choices or schema."""
        question = question_of(obj)
        if question is None:
            return display.EMPTY
        shape: str
        if question.choices is not None:
            shape = format_html(
                '<br><span class="deuz-muted">{} {}</span>',
                _("Choices:"),
                ", ".join(question.choices),
            )
        elif question.schema is not None:
            shape = display.json_block(question.schema, _("Answer schema"))
        else:
            shape = ""
        return format_html("<p>{}</p>{}", question.text, shape)

    @admin.display(description=gettext_lazy("answer"))
    def answered(self, obj: Approval) -> str:
        """A question's answer; who gave it is the status's decider."""
        if obj.answer is None:
            return display.EMPTY
        return display.json_block(obj.answer, _("Answer"))

    @admin.display(description=gettext_lazy("agent path"))
    def agent(self, obj: Approval) -> str:
        return obj.agent_path_label or display.EMPTY

    @admin.display(description=gettext_lazy("owner"))
    def owner(self, obj: Approval) -> str:
        return obj.run.owner.get_username() if obj.run.owner else display.EMPTY

    @admin.display(description=gettext_lazy("created"))
    def created(self, obj: Approval) -> str:
        return display.relative_time(obj.created_at)

    @admin.display(description=gettext_lazy("expires"))
    def expiry(self, obj: Approval) -> str:
        return display.expiry(obj)

    @admin.display(description=gettext_lazy("deadline"))
    def deadline(self, obj: Approval) -> str:
        return display.deadline_detail(obj)

    @admin.display(description=gettext_lazy("reminder"))
    def reminder(self, obj: Approval) -> str:
        return display.reminder(obj)
