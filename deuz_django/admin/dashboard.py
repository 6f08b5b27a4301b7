"""The dashboard: runs, waiting approvals, decision latency, tokens, cost and failures as
charts in the admin, filtered by agent and period.

It sits in the admin index as *Dashboard* (``deuz_django.models.Dashboard``, a proxy model,
is how the admin lists it) at ``admin:deuz_django_dashboard_changelist``. Staff holding
``deuz_django.view_run`` see the run charts, ``deuz_django.view_approval`` the approval
charts; other staff get 403, and anyone else the admin's login page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, cast

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, QueryDict
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..dashboard import (
    DEFAULT_PERIOD,
    PERIODS,
    Chart,
    Scope,
    agent_choices,
    can_view_dashboard,
    charts,
    recent_failures,
)
from ..models import Dashboard, Run
from . import charts as render
from .base import ReadOnlyAdmin


class DashboardFilters(forms.Form):
    """The agent and period filters, read from the query string (period defaults to 30
    days); a value outside the choices is an error the page shows."""

    agent = forms.ChoiceField(label=gettext_lazy("Agent"), required=False)
    period = forms.TypedChoiceField(label=gettext_lazy("Period"), coerce=int)

    def __init__(self, query: QueryDict, *, agents: list[str]) -> None:
        data = query.copy()
        data.setdefault("period", str(DEFAULT_PERIOD))
        super().__init__(data)
        cast(forms.ChoiceField, self.fields["agent"]).choices = [
            ("", _("All agents")),
            *((name, name) for name in agents),
        ]
        cast(forms.ChoiceField, self.fields["period"]).choices = [
            (days, _("Last %(days)s days") % {"days": days}) for days in PERIODS
        ]


@dataclass(frozen=True, slots=True)
class ChartView:
    """A chart with what its template shows: the SVG, the legend and the numbers."""

    chart: Chart
    svg: SafeString
    legend: list[tuple[str, str]]
    header: list[str]
    rows: list[list[str]]


def chart_view(chart: Chart) -> ChartView:
    header, rows = render.table(chart)
    return ChartView(chart, render.svg(chart), render.legend(chart), header, rows)


@admin.register(Dashboard)
class DashboardAdmin(ReadOnlyAdmin):
    template = "admin/deuz_django/dashboard.html"

    class Media:
        css: ClassVar[dict[str, tuple[str, ...]]] = {
            "all": ("deuz_django/admin/deuz-dashboard.css",)
        }

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return can_view_dashboard(request.user)

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "",
                self.admin_site.admin_view(self.dashboard_view),
                name="deuz_django_dashboard_changelist",
            )
        ]

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = DashboardFilters(request.GET, agents=agent_choices(request.user))
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": gettext_lazy("Dashboard"),
            "opts": self.opts,
            "media": self.media,
            "form": form,
        }
        if not form.is_valid():
            return TemplateResponse(request, self.template, context, status=400)
        scope = Scope.for_user(
            request.user,
            agent=form.cleaned_data["agent"],
            period=form.cleaned_data["period"],
        )
        context.update(
            scope=scope,
            charts=[chart_view(chart) for chart in charts(scope)],
            failures=recent_failures(scope),
            run_opts=Run._meta,
        )
        return TemplateResponse(request, self.template, context)
