"""The approval queue: pending calls first and oldest first, decided through Approve/Deny
actions (with a confirmation page listing exactly what will be decided) or the run page's
per-row buttons. Rows are never edited: a decided row is read-only forever.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Case, QuerySet, Value, When
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from ..models import Approval, ApprovalStatus, Run
from ..permissions import decide_refusal, may_decide_some
from ..transcript import pretty
from ..verdicts import expiry_cutoff
from . import display
from .base import ReadOnlyAdmin
from .decisions import ReasonForm, VerdictForm, decide

PENDING_FIRST = Case(
    When(status=ApprovalStatus.PENDING, then=Value(0)), default=Value(1)
).asc()


def run_page(run: Run) -> str:
    return reverse("admin:deuz_django_run_change", args=[run.pk])


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = (
        "tool",
        "call_input",
        "agent",
        "run_link",
        "owner",
        "age",
        "expiry",
        "status_badge",
    )
    list_filter = ("status", "tool_name", "run__agent")
    search_fields = ("tool_name", "approval_id", "run__run_id", "run__owner__username")
    actions = ("approve_selected", "deny_selected")
    changelist_title = gettext_lazy("Approval queue")
    fields = (
        "run_link",
        "tool",
        "call_input",
        "agent",
        "owner",
        "age",
        "expiry",
        "status_badge",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Approval]:
        return Approval.objects.for_user(request.user).select_related(
            "run", "run__owner", "decided_by"
        )

    def get_ordering(self, request: HttpRequest) -> Any:
        return (PENDING_FIRST, "created_at", "id")

    def get_list_display(self, request: HttpRequest) -> Any:
        if expiry_cutoff() is None:
            return tuple(c for c in self.list_display if c != "expiry")
        return self.list_display

    def has_decide_permission(self, request: HttpRequest) -> bool:
        """Whether to offer Approve/Deny at all; each approval is checked again."""
        return may_decide_some(request.user)

    # -- columns ----------------------------------------------------------------------------

    @admin.display(description=gettext_lazy("tool"), ordering="tool_name")
    def tool(self, obj: Approval) -> str:
        return format_html(
            '<strong>{}</strong><br><code class="deuz-muted">{}</code>',
            obj.tool_name,
            obj.approval_id,
        )

    @admin.display(description=gettext_lazy("input"))
    def call_input(self, obj: Approval) -> str:
        return display.json_block(obj.input, _("Input of %s") % obj.tool_name)

    @admin.display(description=gettext_lazy("agent path"))
    def agent(self, obj: Approval) -> str:
        return obj.agent_path_label or display.EMPTY

    @admin.display(description=gettext_lazy("run"), ordering="run__run_id")
    def run_link(self, obj: Approval) -> str:
        return format_html(
            '<a href="{}#approval-{}" title="{}">{}</a><br>'
            '<code class="deuz-muted">{}…</code>',
            run_page(obj.run),
            obj.pk,
            obj.run.run_id,
            obj.run.title or obj.run.run_id,
            obj.run.run_id[:12],
        )

    @admin.display(description=gettext_lazy("owner"), ordering="run__owner__username")
    def owner(self, obj: Approval) -> str:
        return obj.run.owner.get_username() if obj.run.owner else display.EMPTY

    @admin.display(description=gettext_lazy("age"), ordering="created_at")
    def age(self, obj: Approval) -> str:
        return display.relative_time(obj.created_at)

    @admin.display(description=gettext_lazy("expires"))
    def expiry(self, obj: Approval) -> str:
        return display.expiry(obj)

    @admin.display(description=gettext_lazy("status"), ordering="status")
    def status_badge(self, obj: Approval) -> str:
        """The verdict, and for a decided call who recorded it, when and why."""
        status = display.badge(obj.status, obj.get_status_display())
        if obj.is_pending:
            return status
        return format_html(
            '{}<br><span class="deuz-decision">{} · {}</span><br>{}',
            status,
            display.decider(obj),
            display.relative_time(obj.decided_at),
            obj.reason,
        )

    # -- deciding ---------------------------------------------------------------------------

    @admin.action(
        permissions=["decide"], description=gettext_lazy("Approve selected calls")
    )
    def approve_selected(
        self, request: HttpRequest, queryset: QuerySet[Approval]
    ) -> HttpResponse | None:
        return self._confirm_and_decide(request, queryset, approved=True)

    @admin.action(
        permissions=["decide"], description=gettext_lazy("Deny selected calls")
    )
    def deny_selected(
        self, request: HttpRequest, queryset: QuerySet[Approval]
    ) -> HttpResponse | None:
        return self._confirm_and_decide(request, queryset, approved=False)

    def _confirm_and_decide(
        self, request: HttpRequest, queryset: QuerySet[Approval], *, approved: bool
    ) -> HttpResponse | None:
        """First show what will be decided (and what will not, and why); on confirmation,
        decide through the service — which checks every approval again."""
        selected = list(queryset)
        form = ReasonForm(request.POST if request.POST.get("post") == "yes" else None)
        if form.is_valid():
            decide(
                request, selected, approved=approved, reason=form.cleaned_data["reason"]
            )
            return None
        decidable, skipped = [], []
        for approval in selected:
            refusal = (
                _("It was already %s.") % approval.get_status_display()
                if not approval.is_pending
                else decide_refusal(request.user, approval, approving=approved)
            )
            if refusal is None:
                decidable.append((approval, pretty(approval.input)))
            else:
                skipped.append((approval, refusal))
        verb = _("Approve") if approved else _("Deny")
        context = {
            **self.admin_site.each_context(request),
            "title": _("%s these calls?") % verb,
            "opts": self.opts,
            "verb": verb,
            "action": "approve_selected" if approved else "deny_selected",
            "decidable": decidable,
            "skipped": skipped,
            "form": form,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        return TemplateResponse(
            request, "admin/deuz_django/approval/decide_confirmation.html", context
        )

    def get_urls(self) -> list[URLPattern]:
        decide_url = path(
            "<path:object_id>/decide/",
            self.admin_site.admin_view(self.decide_view),
            name="deuz_django_approval_decide",
        )
        return [decide_url, *super().get_urls()]

    @method_decorator(require_POST)
    def decide_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The run page's per-row Approve/Deny buttons post here."""
        if not self.has_decide_permission(request):
            raise PermissionDenied
        approval = self.get_object(request, unquote(object_id))
        if approval is None:
            raise Http404(_("No such approval."))
        form = VerdictForm(request.POST)
        if form.is_valid():
            decide(
                request,
                [approval],
                approved=form.cleaned_data["verdict"] == "approve",
                reason=form.cleaned_data["reason"],
            )
        else:
            messages.error(
                request, _("Nothing was recorded: %s") % form.errors.as_text()
            )
        return HttpResponseRedirect(f"{run_page(approval.run)}#approvals")
