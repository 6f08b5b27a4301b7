"""The audit trail in the admin: a read-only list of every record (for those with the
``view_auditrecord`` permission), filtered by action and tenant and searched by run id,
and the timeline of a run's records on its page (for whoever may see the run).

Records are never added, changed or deleted here — nor anywhere: the model refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..models import Run
from ..models.audit import AuditAction, AuditRecord
from ..runs.transcript import pretty
from . import display
from .base import ReadOnlyAdmin

TIMELINE_LENGTH = 500  # the newest records a run's page shows


class _Details(dict[str, Any]):
    """A record's details for a phrase: a detail it lacks reads "?"."""

    def __missing__(self, key: str) -> str:
        return "?"


def summary(record: AuditRecord) -> str:
    """What the record says happened, in a phrase."""
    details = _Details(record.details if isinstance(record.details, dict) else {})
    action = record.action
    if action in (AuditAction.DECISION, AuditAction.EDIT, AuditAction.ANSWER):
        edited = _(" with an edited input") if action == AuditAction.EDIT else ""
        answered = _(" (answered)") if action == AuditAction.ANSWER else ""
        return (
            f"{details.get('status', '')} {details.get('tool', '')}{edited}{answered}"
        )
    if action == AuditAction.TIMEOUT:
        return _("%(tool)s timed out") % {"tool": details.get("tool", "")}
    if action in (AuditAction.GRANT, AuditAction.GRANT_REVOKED):
        verb = _("allowed") if action == AuditAction.GRANT else _("revoked a grant of")
        return f"{verb} {details.get('tool', '')} ({details.get('scope', '')})"
    if action == AuditAction.RULE_CHANGE:
        return _("rule #%(rule)s %(change)s: %(action)s %(tool)s") % details
    if action == AuditAction.FORK:
        return _("forked at step %(step)s into %(fork)s") % details
    if action == AuditAction.REPLAY:
        return _("replayed as %(replay)s") % details
    if action == AuditAction.INPUT:
        return _("input %(seq)s: %(text)s") % details
    if action == AuditAction.RECOVERY:
        if details.get("gaveUp"):
            return _("recovery gave up after attempt %(attempt)s") % details
        return _("recovered (attempt %(attempt)s)") % details
    return str(details.get("reason") or record.get_action_display())


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    record: AuditRecord

    @property
    def summary(self) -> str:
        return summary(self.record)

    @property
    def details(self) -> str:
        return pretty(self.record.details)


def audit_timeline(run: Run) -> list[TimelineEntry]:
    """The records about ``run`` and its sub-agents' runs, oldest first."""
    about = Q(run_id=run.run_id) | Q(run_id__startswith=f"{run.run_id}::")
    newest = AuditRecord.objects.filter(about).order_by("-tenant", "-sequence")
    records = list(newest[:TIMELINE_LENGTH])
    return [TimelineEntry(record) for record in reversed(records)]


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    list_display = ("position", "when", "action_badge", "actor", "run", "what")
    list_filter = ("action", "tenant")
    search_fields = ("=run_id", "=approval_id")
    search_help_text = gettext_lazy("A run id or an approval id, exactly.")
    fields = (
        "position",
        "when",
        "action_badge",
        "actor",
        "actor_id",
        "run",
        "approval_id",
        "what",
        "details_block",
        "previous_digest",
        "digest",
    )
    readonly_fields = fields
    changelist_title = gettext_lazy("Audit trail")

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditRecord]:
        return AuditRecord.objects.order_by("-created_at", "-sequence")

    @admin.display(description=gettext_lazy("record"), ordering="sequence")
    def position(self, obj: AuditRecord) -> str:
        return f"{obj.tenant}#{obj.sequence}" if obj.tenant else f"#{obj.sequence}"

    @admin.display(description=gettext_lazy("when"), ordering="created_at")
    def when(self, obj: AuditRecord) -> SafeString | str:
        return display.relative_time(obj.created_at)

    @admin.display(description=gettext_lazy("action"), ordering="action")
    def action_badge(self, obj: AuditRecord) -> SafeString:
        return display.badge(f"audit-{obj.action}", obj.get_action_display())

    @admin.display(description=gettext_lazy("run"), ordering="run_id")
    def run(self, obj: AuditRecord) -> SafeString | str:
        if not obj.run_id:
            return display.EMPTY
        url = reverse("admin:deuz_django_run_changelist")
        return format_html(
            '<a href="{}?q={}"><code>{}</code></a>', url, obj.run_id, obj.run_id
        )

    @admin.display(description=gettext_lazy("what"))
    def what(self, obj: AuditRecord) -> str:
        return summary(obj)

    @admin.display(description=gettext_lazy("details"))
    def details_block(self, obj: AuditRecord) -> SafeString:
        return display.json_block(obj.details, _("details"))
