"""Forks on the run page: "Fork from here" at each step of the transcript, the view it
posts to, and the run's lineage (the run it was forked from, the forks made of it).

A step's fork point sits in the transcript where the step's model call began — after
the history it answered, before its turn. Its form forks before the turn (the model is
asked again, optionally with the user message before it rewritten) or, for a turn with
tool calls, with the turn (its calls are asked for again, optionally one call's input
corrected). Everything goes through :func:`deuz_django.services.fork_run`, under the
permission every surface checks (:func:`deuz_django.permissions.can_fork_run`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _

from .. import services
from ..core import Message, ToolUsePart
from ..core.durable import ForkEdit, InvalidForkError
from ..core.durable.codec import decode_json
from ..exceptions import NotPermitted
from ..models import Run, RunStatus
from ..models.visibility import Person
from ..permissions import can_fork_run, can_view_run
from ..runs.transcript import Entry


@dataclass(frozen=True, slots=True)
class ForkPoint:
    """Where step ``step`` may be forked: ``asked`` is the user message before it (what
    "ask differently" rewrites), ``calls`` its turn's calls as ``(id, tool)``."""

    step: int
    basis: int
    asked: str
    calls: tuple[tuple[str, str], ...] = ()


def fork_points(run: Run, history: Sequence[Message]) -> list[ForkPoint]:
    """The run's steps in its journal, and the step its model is due to answer next
    (a run that is not completed, whose history ends with a user or tool message)."""
    points = []
    for step, basis, data in run.journal_steps.order_by("step_index").values_list(
        "step_index", "basis", "message"
    ):
        turn = Message.from_json(decode_json(data))
        calls = tuple((p.id, p.name) for p in turn.parts if isinstance(p, ToolUsePart))
        points.append(ForkPoint(step, basis, _asked(history[:basis]), calls))
    due = bool(history) and history[-1].role in ("user", "tool")
    journaled = bool(points) and points[-1].step >= run.step_index
    if due and run.status != RunStatus.COMPLETED and not journaled:
        points.append(ForkPoint(run.step_index, len(history), _asked(history)))
    return points


def _asked(history: Sequence[Message]) -> str:
    return next((m.text for m in reversed(history) if m.role == "user"), "")


def placed(
    entries: list[Entry], points: list[ForkPoint]
) -> tuple[list[tuple[Entry, ForkPoint | None]], list[ForkPoint]]:
    """The transcript's entries, each with the fork point placed just before it, and
    the points after the last entry."""
    waiting = sorted(points, key=lambda p: p.basis)
    rows: list[tuple[Entry, ForkPoint | None]] = []
    for entry in entries:
        due = None
        if waiting and waiting[0].basis <= entry.message_index:
            due = waiting.pop(0)
        rows.append((entry, due))
    return rows, waiting


def lineage(user: Person | None, run: Run) -> dict[str, Any]:
    """The run it was forked from and the forks made of it, those the user may see."""
    origin = run.forked_from
    return {
        "forked_from": origin if origin and can_view_run(user, origin) else None,
        "fork_edit": edit_summary(run.fork_edit),
        "forks": [
            fork
            for fork in run.forks.select_related("owner").order_by("created_at", "pk")
            if can_view_run(user, fork)
        ],
    }


def edit_summary(edit: dict[str, Any] | None) -> str:
    """What a fork changed at its step, said in a line."""
    if not edit:
        return ""
    if "message" in edit:
        return _("asked “%(text)s”") % {"text": edit["message"]}
    return _("%(call)s's input corrected to %(input)s") % {
        "call": edit.get("toolCallId"),
        "input": json.dumps(edit.get("input"), ensure_ascii=False),
    }


def fork_view(request: HttpRequest, run: Run) -> HttpResponse:
    """Fork ``run`` as the posted form says, then open the fork's page (or come back
    here with what was wrong)."""
    back = redirect(reverse("admin:deuz_django_run_change", args=[run.pk]))
    if not can_fork_run(request.user, run):
        raise PermissionDenied(_("You may not fork this run."))
    try:
        step = _posted_step(request)
        with_turn = request.POST.get("mode") == "turn"
        fork = services.fork_run(
            run.run_id,
            user=request.user,
            step=step,
            edit=_posted_edit(request, with_turn),
            with_turn=with_turn,
        )
    except NotPermitted as error:
        raise PermissionDenied(str(error)) from None
    except (InvalidForkError, ValueError) as error:
        messages.error(request, _("Not forked: %(why)s") % {"why": error})
        return back
    messages.success(
        request,
        _("Forked run %(run)s at step %(step)d: this is the fork, %(fork)s.")
        % {"run": run.run_id, "step": step, "fork": fork.run_id},
    )
    return redirect(reverse("admin:deuz_django_run_change", args=[fork.pk]))


def _posted_step(request: HttpRequest) -> int:
    try:
        return int(request.POST.get("step", ""))
    except ValueError:
        raise ValueError("step: expected a step number") from None


def _posted_edit(request: HttpRequest, with_turn: bool) -> ForkEdit | None:
    """The form's edit: a new message (asking again), or a call's new input (keeping
    the turn); ``None`` when the fields were left empty."""
    if not with_turn:
        message = request.POST.get("message", "")
        return ForkEdit(message=message) if message.strip() else None
    call, text = request.POST.get("tool_call_id", ""), request.POST.get("input", "")
    if not call or not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValueError(f"edit.input: not JSON ({error})") from None
    return ForkEdit(tool_call_id=call, input=value)
