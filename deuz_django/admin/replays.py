"""Replays in the run admin: the "Replay this run …" form on a finished run's page (the
agent among the configured ones, an optional system prompt), the links between a run and
its replays, and the page that shows a replay beside its original, step by step.

Every write goes through :func:`deuz_django.services.replay_run`; who may replay is
:func:`deuz_django.permissions.can_replay_run`'s to say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext as _

from .. import services
from ..core.comparison import ComparedCall, ComparedStep, StepSide
from ..exceptions import (
    NotAReplay,
    NotPermitted,
    RunNotFound,
    RunNotReplayable,
    UnknownAgent,
)
from ..models import Run
from ..models.visibility import Person
from ..permissions import can_replay_run, can_view_run
from ..registry import agent_names
from ..runs.replays import REPLAYABLE, compare_replay
from ..runs.transcript import pretty

# The longest system prompt the form takes (the REST API's limit too).
MAX_SYSTEM = 20000


def replay_context(user: Person | None, run: Run) -> dict[str, Any]:
    """What the run page shows of replays: the run it replays, its replays the user may
    see (each with its comparison), and whether the user may replay it, with what."""
    original = run.replay_of
    return {
        "replay_of": original if original and can_view_run(user, original) else None,
        "replays": [r for r in run.replays.order_by("-pk") if can_view_run(user, r)],
        "can_replay": run.status in REPLAYABLE and can_replay_run(user, run),
        "replay_agents": agent_names(),
        "max_system": MAX_SYSTEM,
    }


@dataclass(frozen=True, slots=True)
class CallCell:
    """A call as the comparison page shows it."""

    call: ComparedCall

    @property
    def input(self) -> str:
        return pretty(self.call.input)

    @property
    def result(self) -> str:
        result = self.call.result
        return result if isinstance(result, str) else pretty(result)


@dataclass(frozen=True, slots=True)
class Row:
    """One step of the comparison page: its two sides, and what differs."""

    step: ComparedStep

    @staticmethod
    def _cells(side: StepSide | None) -> list[CallCell]:
        return [] if side is None else [CallCell(call) for call in side.calls]

    @property
    def original_calls(self) -> list[CallCell]:
        return self._cells(self.step.original)

    @property
    def replay_calls(self) -> list[CallCell]:
        return self._cells(self.step.replay)


class ReplayAdminMixin(admin.ModelAdmin):
    """The run admin's replay form and comparison page."""

    def replay_urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/replay/",
                self.admin_site.admin_view(self.replay_view),
                name="deuz_django_run_replay",
            ),
            path(
                "<path:object_id>/comparison/",
                self.admin_site.admin_view(self.comparison_view),
                name="deuz_django_run_comparison",
            ),
        ]

    def replay_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Replay the run (POST; the agent and system prompt from the form), then show
        the replay's page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        run = self.get_object(request, unquote(object_id))
        if run is None:
            raise Http404(_("No such run."))
        try:
            replay = services.replay_run(
                run.run_id,
                user=request.user,
                agent=request.POST.get("agent") or None,
                system=request.POST.get("system", "")[:MAX_SYSTEM],
            )
        except NotPermitted as error:
            raise PermissionDenied(str(error)) from None
        except (RunNotReplayable, UnknownAgent) as error:
            messages.error(request, str(error))
            return redirect(reverse("admin:deuz_django_run_change", args=[run.pk]))
        messages.success(
            request,
            _(
                "Replay %(replay)s started: it executes no tool; compare it with "
                "%(run)s once it ends."
            )
            % {"replay": replay.run_id, "run": run.run_id},
        )
        return redirect(reverse("admin:deuz_django_run_change", args=[replay.pk]))

    def comparison_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The replay ``object_id`` beside its original, step by step."""
        replay = self.get_object(request, unquote(object_id))
        if replay is None:
            raise Http404(_("No such run."))
        try:
            compared = compare_replay(request.user, replay)
        except (NotAReplay, RunNotFound) as error:
            raise Http404(str(error)) from None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": _("Replay %(replay)s compared with %(run)s")
            % {"replay": replay.run_id, "run": compared.original.run_id},
            "compared": compared,
            "rows": [Row(step) for step in compared.comparison.steps],
        }
        return TemplateResponse(
            request, "admin/deuz_django/run/comparison.html", context
        )
