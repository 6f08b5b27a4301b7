"""The approval queue: pending calls first and oldest first, decided through Approve/Deny
actions (with a confirmation page listing exactly what will be decided) or the run page's
per-row buttons. Rows are never edited: a decided row is read-only forever.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Case, QuerySet, Value, When
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from .. import services
from ..approvals.page_verdicts import decide, form_problems
from ..exceptions import NotPermitted, RunNotFound, RunNotStoppable
from ..models import IN_DOUBT, Approval, ApprovalKind, ApprovalStatus
from ..permissions import STOP_ANY_RUN, decide_refusal, may_decide_some
from ..runs.transcript import pretty
from . import display
from .approval_columns import ApprovalColumns, run_page
from .base import ReadOnlyAdmin
from .decisions import ANSWERS, ReasonForm, VerdictForm
from .runs import pending_row, stop_message
from .standing import DeciderFilter

if TYPE_CHECKING:
    # django-stubs' name for one choice of a list filter (a TypedDict).
    from django.contrib.admin.filters import _ListFilterChoices

PENDING_FIRST = Case(
    When(status=ApprovalStatus.PENDING, then=Value(0)), default=Value(1)
).asc()


class StatusFilter(admin.SimpleListFilter):
    """By status, pending unless asked otherwise: the queue is the work still to do."""

    title = gettext_lazy("status")
    parameter_name = "status"
    ALL = "all"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [*ApprovalStatus.choices, (self.ALL, _("All"))]

    def value(self) -> str:
        return super().value() or ApprovalStatus.PENDING

    def choices(self, changelist: Any) -> Iterator[_ListFilterChoices]:
        choices = super().choices(changelist)
        next(
            choices
        )  # Django's own "All" drops the parameter, which means "pending" here
        yield from choices

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[Approval]
    ) -> QuerySet[Approval]:
        if self.value() == self.ALL:
            return queryset
        return queryset.filter(status=self.value())


@admin.register(Approval)
class ApprovalAdmin(ApprovalColumns, ReadOnlyAdmin):
    # Few, narrow columns, so the queue fits a laptop screen beside the admin's sidebars:
    # long inputs and titles are cut short, with the whole value in the tooltip and on
    # the approval's own page.
    list_display = ("call", "call_input", "run_link", "status_badge")
    list_filter = (StatusFilter, DeciderFilter, "kind", "tool_name", "run__agent")
    search_fields = ("tool_name", "approval_id", "run__run_id", "run__owner__username")
    actions = ("approve_selected", "deny_selected", "stop_runs")
    changelist_title = gettext_lazy("Approval queue")
    fields = (
        "run_link",
        "kind_label",
        "tool",
        "full_input",
        "edited",
        "asked",
        "answered",
        "agent",
        "owner",
        "created",
        "expiry",
        "deadline",
        "reminder",
        "status_badge",
    )
    readonly_fields = fields
    change_form_template = "admin/deuz_django/approval/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Approval]:
        return Approval.objects.for_user(request.user).select_related(
            "run",
            "run__owner",
            "decided_by",
            "decided_by_rule__created_by",
            "decided_by_grant__created_by",
            "decided_by_grant__run",
            "decided_by_grant__owner",
        )

    def get_ordering(self, request: HttpRequest) -> Any:
        return (PENDING_FIRST, "created_at", "id")

    def has_decide_permission(self, request: HttpRequest) -> bool:
        """Whether to offer Approve/Deny at all; each approval is checked again."""
        return may_decide_some(request.user)

    def has_stop_permission(self, request: HttpRequest) -> bool:
        """Whether to offer "Stop": to those who may stop others' runs (each run is
        checked again; an owner stops their own from its page, REST or the chat)."""
        return bool(request.user.has_perm(STOP_ANY_RUN))

    # -- stopping ---------------------------------------------------------------------------

    @admin.action(
        permissions=["stop"],
        description=gettext_lazy("Stop the runs of selected calls"),
    )
    def stop_runs(self, request: HttpRequest, queryset: QuerySet[Approval]) -> None:
        run_ids = sorted(set(queryset.values_list("run__run_id", flat=True)))
        for run_id in run_ids:
            try:
                stopped = services.stop_run(
                    run_id,
                    user=request.user,
                    reason=_("Stopped from the approval queue."),
                )
            except (NotPermitted, RunNotFound, RunNotStoppable) as error:
                messages.warning(request, f"{run_id}: {error}")
            else:
                messages.success(request, stop_message(stopped))

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
        action = "approve_selected" if approved else "deny_selected"
        return self._confirmation(request, selected, approved, form, {"action": action})

    def _confirmation(
        self,
        request: HttpRequest,
        selected: list[Approval],
        approved: bool,
        form: ReasonForm,
        fields: dict[str, str],
        *,
        verdict: str | None = None,
        result: str = "",
        edit: Any = None,
        allow: str = "",
        answer: str = "",
    ) -> TemplateResponse:
        """The confirmation page; ``fields`` are posted back with the verdict.

        ``verdict`` is the run page button's (one approval): for a call a crash left in
        doubt, the page asks in the words of its three answers and shows the ``result``
        that "it happened" will record; ``edit`` is the difference an edited input
        makes (:func:`display.input_diff`); ``allow`` says what the grant asked for
        will approve; ``answer`` is a question's answer, as it will be recorded."""
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
        in_doubt = verdict is not None and all(
            a.kind == ApprovalKind.OUTCOME_UNKNOWN for a in selected
        )
        context = {
            **self.admin_site.each_context(request),
            "title": _("%s these calls?") % verb,
            "opts": self.opts,
            "verb": verb,
            "fields": fields,
            "decidable": decidable,
            "skipped": skipped,
            "form": form,
            "answer": ANSWERS[verdict] if in_doubt and verdict else None,
            "in_doubt": IN_DOUBT,
            "result": result,
            "edit": edit,
            "allow": allow,
            "question_answer": answer,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        return TemplateResponse(
            request, "admin/deuz_django/approval/decide_confirmation.html", context
        )

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The approval's page; a pending one offers the run page's buttons (and the
        input editor) here too."""
        approval = self.get_object(request, unquote(object_id))
        context = dict(extra_context or {})
        if approval is not None and approval.is_pending:
            context.update(
                row=pending_row(request.user, approval),
                answers=ANSWERS,
                in_doubt=IN_DOUBT,
            )
        return super().change_view(request, object_id, form_url, context)

    def get_urls(self) -> list[URLPattern]:
        decide_url = path(
            "<path:object_id>/decide/",
            self.admin_site.admin_view(self.decide_view),
            name="deuz_django_approval_decide",
        )
        return [decide_url, *super().get_urls()]

    @method_decorator(require_POST)
    def decide_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The run page's buttons post here (Approve/Deny, or for a call a crash left in
        doubt the three answers): first the confirmation page (the queue's, with the
        reason box), then — confirmed — the verdict."""
        if not self.has_decide_permission(request):
            raise PermissionDenied
        approval = self.get_object(request, unquote(object_id))
        if approval is None:
            raise Http404(_("No such approval."))
        form = VerdictForm(request.POST)
        back = HttpResponseRedirect(f"{run_page(approval.run)}#approvals")
        if not form.is_valid():
            messages.error(request, _("Nothing was recorded: %s") % form_problems(form))
            return back
        try:
            answer = form.answer_of(approval)
        except ValueError as error:
            messages.error(request, _("Nothing was recorded: %s") % error)
            return back
        if request.POST.get("post") != "yes":
            return self._confirm_verdict(request, approval, form, answer)
        decide(
            request,
            [approval],
            approved=form.approved,
            reason=form.cleaned_data["reason"],
            result=form.recorded_result,
            edited_input=form.edit_of(approval),
            allow=form.allow,
            answer=answer,
        )
        return back

    def _confirm_verdict(
        self, request: HttpRequest, approval: Approval, form: VerdictForm, answer: Any
    ) -> HttpResponse:
        """The confirmation page of a run page's button, carrying what it posted."""
        verdict = form.cleaned_data["verdict"]
        fields = {"verdict": verdict}
        recorded = form.recorded_result
        if recorded is not None:
            fields["result"] = request.POST["result"]
            if recorded.is_error:
                fields["is_error"] = "on"
        edited = form.edit_of(approval)
        if edited is not None:
            fields["edited_input"] = request.POST["edited_input"]
        allow = form.allow
        if allow is not None:
            fields["allow_scope"] = allow.scope
            if allow.hours is not None:
                fields["allow_hours"] = str(allow.hours)
        if answer is not None:
            fields["answer"] = request.POST["answer"]
        return self._confirmation(
            request,
            [approval],
            form.approved,
            ReasonForm(),
            fields,
            verdict=verdict,
            result="" if recorded is None else pretty(recorded.value),
            edit=None if edited is None else display.input_diff(approval.input, edited),
            allow="" if allow is None else display.allowance(approval, allow),
            answer="" if answer is None else pretty(answer),
        )
