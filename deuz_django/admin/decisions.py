"""Deciding approvals from the admin, and telling the staff member what happened.

The queue's actions and the run page's buttons both come through :func:`decide`, which
records every verdict with :func:`deuz_django.services.decide_approval` — the same
permission rules and signer check as the REST and WebSocket paths — and then continues
each run whose last pending approval was decided, in the background
(:func:`deuz_django.services.enqueue_run`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import services
from ..approvals.questions import read_answer
from ..approvals.verdicts import RecordedResult
from ..exceptions import (
    ApprovalAlreadyDecided,
    ApprovalNotFound,
    InvalidVerdict,
    NotPermitted,
    ProcessStopping,
    RunBusy,
    RunNotResumable,
)
from ..models import Approval, ApprovalKind, Run, RunStatus
from ..models.rules import GrantScope
from ..rules.grants import Allow
from .display import decider, exact_time

REASON_MAX_LENGTH = 2000
ALREADY_COMPLETED = gettext_lazy("Run %(run)s is already completed.")


class ReasonForm(forms.Form):
    reason = forms.CharField(
        label=gettext_lazy("Reason (optional)"),
        required=False,
        max_length=REASON_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
    )


class VerdictForm(ReasonForm):
    """A per-row button's verdict. ``happened`` answers an ``outcome_unknown`` approval
    with the call's outcome (``result``, JSON); there ``approve`` runs the call again and
    ``deny`` marks it failed."""

    verdict = forms.ChoiceField(
        choices=[("approve", "approve"), ("deny", "deny"), ("happened", "happened")]
    )
    result = forms.JSONField(
        label=gettext_lazy("Result (JSON)"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60}),
    )
    is_error = forms.BooleanField(
        label=gettext_lazy("The call failed: record this result as its error"),
        required=False,
    )
    edited_input = forms.JSONField(
        label=gettext_lazy("Edited input (JSON)"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 60}),
    )
    # "Approve and allow …": a grant for the tool's later calls (deuz_django.rules.grants).
    allow_scope = forms.ChoiceField(
        label=gettext_lazy("Allow later calls"),
        choices=[("", "—"), *GrantScope.choices],
        required=False,
    )
    allow_hours = forms.IntegerField(
        label=gettext_lazy("For how many hours"), required=False
    )
    # A question's answer: a choice or text as given, JSON for a question with a schema.
    answer = forms.CharField(
        label=gettext_lazy("Answer"),
        required=False,
        max_length=REASON_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
    )

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        given = str(self.data.get("result", "")).strip()
        if cleaned.get("verdict") == "happened" and "result" in cleaned and not given:
            self.add_error("result", _("Give the call's result as JSON."))
        edited = cleaned.get("edited_input")
        if edited is not None and not isinstance(edited, dict):
            self.add_error("edited_input", _("Give the call's input as a JSON object."))
        return cleaned

    def edit_of(self, approval: Approval) -> dict[str, Any] | None:
        """The edited input, unless it is the model's own (then nothing was edited)."""
        edited: dict[str, Any] | None = self.cleaned_data.get("edited_input")
        return None if edited == approval.input else edited

    @property
    def approved(self) -> bool:
        return self.cleaned_data["verdict"] != "deny"

    def answer_of(self, approval: Approval) -> Any:
        """The answer an approving verdict gives ``approval``'s question (``None``: none
        given; :func:`~deuz_django.approvals.questions.read_answer` raises ``ValueError``)."""
        if not self.approved:
            return None
        return read_answer(approval, self.cleaned_data.get("answer", ""))

    @property
    def allow(self) -> Allow | None:
        """The grant asked for (hours count for the owner scope only); the verdict's
        check says whether it may be made."""
        scope = self.cleaned_data.get("allow_scope")
        if not scope:
            return None
        owner_wide = scope == GrantScope.OWNER
        return Allow(
            scope, self.cleaned_data.get("allow_hours") if owner_wide else None
        )

    @property
    def recorded_result(self) -> RecordedResult | None:
        """What "it happened" records (``None`` for the other verdicts)."""
        if self.cleaned_data["verdict"] != "happened":
            return None
        return RecordedResult(
            self.cleaned_data["result"], self.cleaned_data["is_error"]
        )


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer to a call a crash left in doubt, as the admin words it."""

    label: str
    effect: str


# By the verdict a button posts (VerdictForm.verdict).
ANSWERS = {
    "happened": Answer(
        gettext_lazy("It happened — record this result"),
        gettext_lazy("The run goes on with this result; the call does not run again."),
    ),
    "approve": Answer(
        gettext_lazy("Run it again"),
        gettext_lazy("The call runs once more when the run continues."),
    ),
    "deny": Answer(
        gettext_lazy("Mark it failed"),
        gettext_lazy("The call is answered with an error; it does not run again."),
    ),
}


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
    """Record one verdict per approval, report each outcome, resume the runs now ready.

    ``result`` is "it happened" on an ``outcome_unknown`` approval: the call's outcome;
    ``edited_input`` approves a call of an ``editable`` tool with that input instead;
    ``allow`` approves and allows the tool's later calls (a grant); ``answer`` answers
    a question.
    """
    recorded: list[Approval] = []
    ready: dict[int, Run] = {}
    for approval in approvals:
        try:
            decision = services.decide_approval(
                approval,
                user=request.user,
                approved=approved,
                reason=reason,
                result=result,
                edited_input=edited_input,
                allow=allow,
                answer=answer,
            )
        except (NotPermitted, ApprovalNotFound) as error:
            messages.error(
                request,
                _("%(call)s: %(why)s Nothing was recorded.")
                % {"call": call_label(approval), "why": error},
            )
            continue
        except ApprovalAlreadyDecided:
            messages.warning(request, already_decided(approval))
            continue
        except InvalidVerdict as error:
            refused = (
                _("%(call)s was not answered: %(why)s")
                if approval.kind == ApprovalKind.QUESTION
                else _("%(call)s was not approved: %(why)s")
            )
            messages.error(
                request, refused % {"call": call_label(approval), "why": error}
            )
            continue
        if decision.expired:
            messages.warning(
                request,
                _("%(call)s had expired; it was recorded as expired and will not run.")
                % {"call": call_label(approval)},
            )
        else:
            recorded.append(decision.approval)
            for grant in decision.approval.grants_made.all():
                messages.info(
                    request,
                    _("%(grant)s approves later calls automatically.")
                    % {"grant": str(grant).capitalize()},
                )
        if decision.run_ready:
            ready[approval.run_id] = approval.run
    if recorded:
        calls = ", ".join(call_label(a) for a in recorded)
        messages.success(
            request,
            _recorded_text(recorded, approved, result)
            % {"calls": calls, "count": len(recorded)},
        )
    for run in ready.values():
        resume_and_report(request, run)


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
        "who": decider(stored),
        "when": exact_time(stored.decided_at) if stored.decided_at else "?",
    }


def resume_and_report(request: HttpRequest, run: Run) -> None:
    """Continue ``run`` in the background; a completed or busy run is reported, not
    continued."""
    level, text = _resume(run)
    messages.add_message(request, level, text)


def _resume(run: Run) -> tuple[int, str]:
    params = {"run": run.run_id}
    try:
        services.enqueue_run(run.run_id)
    except ProcessStopping:
        text = _(
            "This server is shutting down; run %(run)s continues once a server or "
            "worker picks it up."
        )
        return messages.WARNING, text % params
    except RunBusy:
        text = _("Run %(run)s is busy; it will continue when the current leg ends.")
        return messages.WARNING, text % params
    except RunNotResumable as error:
        run.refresh_from_db(fields=["status"])
        if run.status == RunStatus.COMPLETED:  # another resume finished it meanwhile
            return messages.INFO, ALREADY_COMPLETED % params
        text = _("Run %(run)s was not resumed: %(detail)s")
        return messages.WARNING, text % {**params, "detail": error}
    # Queued for a worker, or handed to this server's event loop or a thread of it:
    # never run inside this request (deuz_django.runs.continuing.hand_off).
    return messages.SUCCESS, _("Run %(run)s resumed in the background.") % params
