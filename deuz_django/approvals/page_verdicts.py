"""Verdicts given on a web page — the admin's queue and run page, an action link's page —
recorded through the one verdict service (:func:`deuz_django.services.record_verdicts`)
and each outcome told to the person with ``django.contrib.messages``: what was recorded,
what was refused and why, and what becomes of the run, said as it is.

No admin here: an action link's page works in a project that does not route the admin.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest
from django.utils import formats, timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import services
from ..exceptions import (
    ApprovalAlreadyDecided,
    ApprovalNotFound,
    InvalidVerdict,
    NotPermitted,
    ProcessStopping,
    RunBusy,
)
from ..models import Approval, ApprovalKind, RunStatus
from ..quorum.progress import progress_of
from ..rules.grants import Allow
from ..runs.recovery import who_continues
from .verdicts import RecordedResult, Verdict

REASON_MAX_LENGTH = 2000
ALREADY_COMPLETED = gettext_lazy("Run %(run)s is already completed.")


def form_problems(form: forms.Form) -> str:
    """``Result (JSON): Enter a valid JSON.`` — each error after its field's label."""
    parts = []
    for name, errors in form.errors.items():
        text = " ".join(str(e) for e in errors)
        field = form.fields.get(name)
        parts.append(f"{field.label or name}: {text}" if field else text)
    return " ".join(parts)


def call_label(approval: Approval) -> str:
    return _("%(tool)s (%(id)s) on run %(run)s") % {
        "tool": approval.tool_name,
        "id": approval.approval_id,
        "run": approval.run.run_id,
    }


def decide(
    request: HttpRequest,
    approvals: Iterable[Approval],
    *,
    approved: bool,
    reason: str = "",
    result: RecordedResult | None = None,
    edited_input: dict[str, Any] | None = None,
    allow: Allow | None = None,
    answer: Any = None,
) -> None:
    """Record one verdict per approval, report each outcome, and what became of each run
    whose last pending approval was decided (continued in the background).

    ``result`` is "it happened" on an ``outcome_unknown`` approval: the call's outcome;
    ``edited_input`` approves a call of an ``editable`` tool with that input instead;
    ``allow`` approves and allows the tool's later calls (a grant); ``answer`` answers
    a question.
    """
    verdict = Verdict(
        approved=approved,
        reason=reason,
        result=result,
        edited_input=edited_input,
        allow=allow,
        answer=answer,
    )
    recorded: list[Approval] = []
    continuations: list[services.Recorded] = []
    for approval in approvals:
        done = _record(request, approval, verdict)
        if done is None:
            continue
        decision = done.decisions[0]
        if decision.expired:
            messages.warning(
                request,
                _("%(call)s had expired; it was recorded as expired and will not run.")
                % {"call": call_label(approval)},
            )
        elif decision.approval.is_pending:  # a vote: the call needs more approvals
            _say_voted(request, decision.approval)
        else:
            recorded.append(decision.approval)
            _say_granted(request, decision.approval)
        if done.run_ready:
            continuations.append(done)
    if recorded:
        calls = ", ".join(call_label(a) for a in recorded)
        messages.success(
            request,
            _recorded_text(recorded, approved, result)
            % {"calls": calls, "count": len(recorded)},
        )
    for done in continuations:
        level, text = _continuation(done)
        messages.add_message(request, level, text)


def _say_granted(request: HttpRequest, approval: Approval) -> None:
    for grant in approval.grants_made.all():
        messages.info(
            request,
            _("%(grant)s approves later calls automatically.")
            % {"grant": str(grant).capitalize()},
        )


def _say_voted(request: HttpRequest, approval: Approval) -> None:
    progress = progress_of(approval)
    messages.success(
        request,
        _("Your verdict on %(call)s is recorded: %(progress)s.")
        % {
            "call": call_label(approval),
            "progress": progress.summary if progress else _("it waits"),
        },
    )


def _record(
    request: HttpRequest, approval: Approval, verdict: Verdict
) -> services.Recorded | None:
    """The verdict on ``approval`` through the verdict service; ``None`` when it was
    refused, the refusal told to the person."""
    try:
        return services.record_verdicts(request.user, [(approval, verdict)])
    except (NotPermitted, ApprovalNotFound) as error:
        messages.error(
            request,
            _("%(call)s: %(why)s Nothing was recorded.")
            % {"call": call_label(approval), "why": error},
        )
    except ApprovalAlreadyDecided:
        messages.warning(request, already_decided(approval))
    except InvalidVerdict as error:
        refused = (
            _("%(call)s was not answered: %(why)s")
            if approval.kind == ApprovalKind.QUESTION
            else _("%(call)s was not approved: %(why)s")
        )
        messages.error(request, refused % {"call": call_label(approval), "why": error})
    return None


def _recorded_text(
    recorded: list[Approval], approved: bool, result: RecordedResult | None
) -> str:
    """What was recorded, in the words of the question asked: for calls a crash left in
    doubt "it happened", "run it again" or "mark it failed", else approved or denied."""
    count = len(recorded)
    if approved and all(a.kind == ApprovalKind.QUESTION for a in recorded):
        return ngettext(
            "Answered %(calls)s.", "Answered %(count)d calls: %(calls)s.", count
        )
    if all(a.kind == ApprovalKind.OUTCOME_UNKNOWN for a in recorded):
        if result is not None:
            return ngettext(
                "Recorded the result of %(calls)s: it happened.",
                "Recorded the result of %(count)d calls: %(calls)s.",
                count,
            )
        if approved:
            return ngettext(
                "%(calls)s will run again.",
                "%(count)d calls will run again: %(calls)s.",
                count,
            )
        return ngettext(
            "Marked %(calls)s failed.",
            "Marked %(count)d calls failed: %(calls)s.",
            count,
        )
    return (
        ngettext(
            "Approved %(calls)s.",
            "Approved %(count)d calls: %(calls)s.",
            len(recorded),
        )
        if approved
        else ngettext(
            "Denied %(calls)s.", "Denied %(count)d calls: %(calls)s.", len(recorded)
        )
    )


def already_decided(approval: Approval) -> str:
    """``... was already approved by bob at <time>`` — from the row as stored now."""
    stored = Approval.objects.select_related("decided_by").get(pk=approval.pk)
    return _("%(call)s was already %(status)s by %(who)s at %(when)s.") % {
        "call": call_label(approval),
        "status": stored.get_status_display(),
        "who": stored.decider,
        "when": _exact_time(stored.decided_at) if stored.decided_at else "?",
    }


def _continuation(done: services.Recorded) -> tuple[int, str]:
    """What became of a run nothing is left undecided on, as a message level and text."""
    run = done.decisions[-1].approval.run
    params = {"run": run.run_id}
    if done.continued is not None:
        # Queued for a worker, or handed to this server's event loop or a thread of it:
        # never run inside this request (deuz_django.runs.continuing.hand_off).
        text = _("Run %(run)s resumed: %(where)s.")
        where = who_continues(done.continued)
        return messages.SUCCESS, text % {**params, "where": where}
    error = done.not_continued
    if isinstance(error, ProcessStopping):
        text = _(
            "This server is shutting down; run %(run)s continues once a server or "
            "worker picks it up."
        )
        return messages.WARNING, text % params
    if isinstance(error, RunBusy):
        text = _("Run %(run)s is busy; it will continue when the current leg ends.")
        return messages.WARNING, text % params
    run.refresh_from_db(fields=["status"])
    if run.status == RunStatus.COMPLETED:  # another resume finished it meanwhile
        return messages.INFO, ALREADY_COMPLETED % params
    text = _("Run %(run)s was not resumed: %(detail)s")
    return messages.WARNING, text % {**params, "detail": error}


def _exact_time(moment: Any) -> str:
    return formats.date_format(timezone.localtime(moment), "DATETIME_FORMAT")
