"""The run browser: root runs the staff member may see, each with a read-only page showing
its transcript (sub-agents included) with "Fork from here" at each step (:mod:`.forks`),
its lineage, its pending approvals with Approve/Deny buttons (for a call a crash left in
doubt: it happened, run it again, mark it failed), its decision history, its replays
(:mod:`.replays`) and its audit timeline (:mod:`.audit`). Runs are never edited by
hand: every write goes through the service.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.urls import URLPattern, path, reverse
from django.utils.html import escape, format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from .. import services
from ..approvals.questions import question_of
from ..approvals.tool_versions import definition_changes
from ..conf import deuz_settings
from ..core.questions import Question
from ..exceptions import NotPermitted, RunNotStoppable
from ..models import IN_DOUBT, Approval, ApprovalKind, ApprovalStatus, Run, RunStatus
from ..models.rules import GrantScope
from ..models.visibility import Person
from ..permissions import (
    can_fork_run,
    can_stop_run,
    decide_refusal,
    edit_refusal,
    is_editable,
)
from ..rules.grants import Allow, allow_problem, max_hours
from ..runs.stopping import FINISHED
from ..runs.transcript import pretty, run_messages, sections
from . import display, forks
from .audit import audit_timeline
from .base import ReadOnlyAdmin
from .decisions import ANSWERS
from .replays import ReplayAdminMixin, replay_context


class HasPendingFilter(admin.SimpleListFilter):
    title = gettext_lazy("pending approvals")
    parameter_name = "pending"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", _("Has pending approvals")), ("no", _("None pending"))]

    # The queryset is the run admin's, annotated with pending_count (not a field).
    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(pending_count__gt=0)
        if self.value() == "no":
            return queryset.filter(pending_count=0)
        return queryset


class OwnerFilter(admin.RelatedOnlyFieldListFilter):
    """By owner; runs started without a signed-in user are "No owner" (not a dash)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.empty_value_display = escape(_("No owner"))  # as the template would


@dataclass(frozen=True, slots=True)
class PendingRow:
    """A pending approval as the viewing user may act on it."""

    approval: Approval
    can_approve: bool
    can_deny: bool
    refusal: str | None
    can_edit: bool = False  # may approve it with an edited input
    can_allow: bool = False  # may approve it and allow the tool's later calls
    # Why the tool's calls may not be allowed for the owner's runs (None: they may).
    owner_refusal: str | None = None

    @property
    def input(self) -> str:
        return pretty(self.approval.input)

    @property
    def question(self) -> Question | None:
        """What a question tool's call asks: answered with a form, not Approve/Deny."""
        return question_of(self.approval)

    @property
    def client_call(self) -> bool:
        """A client tool's call waiting for its result (D11), recorded as JSON here."""
        return self.approval.kind == ApprovalKind.CLIENT_TOOL

    @property
    def schema(self) -> str:
        """The JSON schema a question's answer must match, for people to read."""
        question = self.question
        return (
            ""
            if question is None or question.schema is None
            else pretty(question.schema)
        )

    @property
    def deadline(self) -> str:
        """When the call times out or escalates, and the time left (``""``: never)."""
        return display.deadline(self.approval)

    @property
    def max_hours(self) -> int:
        return max_hours()

    @property
    def in_doubt(self) -> bool:
        """A call a crash left in doubt: answered "it happened", "run it again" or
        "mark it failed" instead of approved or denied."""
        return self.approval.kind == ApprovalKind.OUTCOME_UNKNOWN

    @property
    def tool_changes(self) -> list[str]:
        """What a deploy changed in the tool since the call was asked."""
        return definition_changes(self.approval)


def pending_row(user: Person | None, approval: Approval) -> PendingRow:
    approve_refusal = decide_refusal(user, approval, approving=True)
    deny_refusal = decide_refusal(user, approval, approving=False)
    gated = approval.kind == ApprovalKind.APPROVAL
    owner_wide = allow_problem(approval, True, Allow(GrantScope.OWNER, 1))
    return PendingRow(
        approval,
        can_approve=approve_refusal is None,
        can_deny=deny_refusal is None,
        refusal=approve_refusal or deny_refusal,
        can_edit=gated
        and is_editable(approval)
        and edit_refusal(user, approval) is None,
        can_allow=gated and approve_refusal is None,
        owner_refusal=None if owner_wide is None else owner_wide[1],
    )


def pending_rows(user: Person | None, run: Run) -> list[PendingRow]:
    return [
        pending_row(user, approval)
        for approval in run.approvals.pending().select_related("run")
    ]


@admin.register(Run)
class RunAdmin(ReplayAdminMixin, ReadOnlyAdmin):
    list_display = (
        "run",
        "agent",
        "owner",
        "status_badge",
        "pending",
        "steps",
        "tokens",
        "cost",
        "last_activity",
    )
    list_filter = (
        "status",
        "agent",
        ("owner", OwnerFilter),
        HasPendingFilter,
    )
    search_fields = ("run_id", "owner__username", "title")
    list_select_related = ("owner",)
    actions = None
    changelist_title = gettext_lazy("Agent runs")
    fieldsets = (
        (None, {"fields": ("run_id", "title", "agent", "owner", "status_badge")}),
        (
            gettext_lazy("Progress"),
            {
                "fields": (
                    "steps",
                    "usage_summary",
                    "cost",
                    "created_at",
                    "last_activity",
                )
            },
        ),
        (gettext_lazy("Last error"), {"fields": ("last_error", "recovery")}),
    )
    readonly_fields = (
        "recovery",
        "status_badge",
        "steps",
        "usage_summary",
        "cost",
        "last_activity",
    )
    change_form_template = "admin/deuz_django/run/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        # for_user gives root runs only: sub-agents show on their parent's page.
        return Run.objects.for_user(request.user).annotate(
            pending_count=Count(
                "approvals", filter=Q(approvals__status=ApprovalStatus.PENDING)
            )
        )

    def get_fieldsets(self, request: HttpRequest, obj: Run | None = None) -> Any:
        if obj is not None and not obj.last_error:
            return self.fieldsets[:-1]
        return self.fieldsets

    # -- columns ----------------------------------------------------------------------------

    @admin.display(description=gettext_lazy("run"), ordering="run_id")
    def run(self, obj: Run) -> str:
        return format_html(
            '<code>{}</code><br><span class="deuz-muted">{}</span>',
            obj.run_id,
            obj.title or "",
        )

    @admin.display(description=gettext_lazy("status"), ordering="status")
    def status_badge(self, obj: Run) -> str:
        badge = display.badge(obj.status, obj.get_status_display())
        if obj.last_error and obj.recover_after is not None:
            return format_html("{} {}", badge, display.badge("retrying", _("retrying")))
        if obj.last_error:
            return format_html("{} {}", badge, display.badge("failed", _("failed")))
        return badge

    @admin.display(description=gettext_lazy("recovery"))
    def recovery(self, obj: Run) -> str:
        """Whether automatic recovery retries the run, and when (deuz_django.runs.recovery)."""
        limit = int(deuz_settings.RECOVERY_MAX_ATTEMPTS)
        if obj.recover_after is not None:
            return _(
                "Retried automatically: attempt %(next)d of %(limit)d after %(at)s."
            ) % {
                "next": obj.recovery_attempts + 1,
                "limit": limit,
                "at": display.exact_time(obj.recover_after),
            }
        if obj.recovery_attempts:
            return _("Not retried: %(count)d automatic attempts were made.") % {
                "count": obj.recovery_attempts
            }
        return _("Not retried automatically: resume it when its cause is fixed.")

    @admin.display(description=gettext_lazy("pending"), ordering="pending_count")
    def pending(self, obj: Run) -> str:
        count: int = getattr(obj, "pending_count", 0)
        return display.badge("pending", str(count)) if count else "0"

    @admin.display(description=gettext_lazy("steps"), ordering="step_index")
    def steps(self, obj: Run) -> int:
        return obj.step_index

    @admin.display(description=gettext_lazy("tokens"))
    def tokens(self, obj: Run) -> str:
        return f"{obj.total_tokens:,}"

    @admin.display(description=gettext_lazy("cost"))
    def cost(self, obj: Run) -> str:
        return display.cost_label(obj)

    @admin.display(description=gettext_lazy("last activity"), ordering="updated_at")
    def last_activity(self, obj: Run) -> str:
        return display.relative_time(obj.updated_at)

    @admin.display(description=gettext_lazy("usage"))
    def usage_summary(self, obj: Run) -> str:
        usage = obj.usage or {}
        return _("%(input)s in / %(output)s out / %(total)s total tokens") % {
            "input": f"{usage.get('inputTokens', 0):,}",
            "output": f"{usage.get('outputTokens', 0):,}",
            "total": f"{obj.total_tokens:,}",
        }

    # -- the read-only page -----------------------------------------------------------------

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        run = self.get_object(request, unquote(object_id))
        context = dict(extra_context or {})
        if run is not None:
            transcript = sections(run)
            points = (
                forks.fork_points(run, run_messages(run))
                if can_fork_run(request.user, run)
                else []
            )
            root_rows, trailing_points = forks.placed(transcript[0].entries, points)
            context.update(
                forks.lineage(request.user, run),
                sections=transcript[1:],
                root_rows=root_rows,
                trailing_points=trailing_points,
                **replay_context(request.user, run),
                pending_rows=pending_rows(request.user, run),
                audit_timeline=audit_timeline(run),
                answers=ANSWERS,
                in_doubt=IN_DOUBT,
                can_stop=run.status not in FINISHED
                and run.stop_requested_at is None
                and can_stop_run(request.user, run),
                # A stop asked as the run completed never took effect.
                stop=None
                if run.stop_requested_at is None or run.status == RunStatus.COMPLETED
                else run.stop_description,
                decided=[
                    (
                        a,
                        None
                        if a.edited_input is None
                        else display.input_diff(a.input, a.edited_input),
                        display.decided_by(a),
                    )
                    for a in run.approvals.exclude(status=ApprovalStatus.PENDING)
                    .select_related(
                        "decided_by",
                        "decided_by_rule__created_by",
                        "decided_by_grant__created_by",
                        "decided_by_grant__run",
                        "decided_by_grant__owner",
                        "execution__step__run",
                    )
                    .order_by("decided_at", "pk")
                ],
            )
        return super().change_view(request, object_id, form_url, context)

    def get_urls(self) -> list[URLPattern]:
        stop = path(
            "<path:object_id>/stop/",
            self.admin_site.admin_view(self.stop_view),
            name="deuz_django_run_stop",
        )
        fork = path(
            "<path:object_id>/fork/",
            self.admin_site.admin_view(self.fork_view),
            name="deuz_django_run_fork",
        )
        return [stop, fork, *self.replay_urls(), *super().get_urls()]

    def fork_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Fork the run at the posted step ("Fork from here"), then open the fork."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        run = self.get_object(request, unquote(object_id))
        if run is None:
            raise Http404(_("No such run."))
        return forks.fork_view(request, run)

    def stop_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Stop the run (POST; the reason from the form): at once, or at the next fence
        of the leg holding it."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        run = self.get_object(request, unquote(object_id))
        if run is None:
            raise Http404(_("No such run."))
        reason = request.POST.get("reason", "")[:1000]
        try:
            stopped = services.stop_run(run.run_id, user=request.user, reason=reason)
        except NotPermitted as error:
            raise PermissionDenied(str(error)) from None
        except RunNotStoppable as error:
            messages.warning(request, str(error))
        else:
            messages.success(request, stop_message(stopped))
        return redirect(reverse("admin:deuz_django_run_change", args=[run.pk]))


def stop_message(run: Run) -> str:
    """What a person who stopped ``run`` is told."""
    if run.status == RunStatus.STOPPED:
        return _("Run %(run)s is stopped.") % {"run": run.run_id}
    return _(
        "Run %(run)s stops before its next model call or tool execution (a leg is "
        "running it now)."
    ) % {"run": run.run_id}
