"""The admin's verdict forms: a reason, and a per-row button's verdict ("it happened",
an edit, an answer, "approve and allow"). The queue's actions and the run page's buttons
record what they give through :func:`deuz_django.approvals.page_verdicts.decide`, as the
action-link page does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..approvals.page_verdicts import REASON_MAX_LENGTH
from ..approvals.questions import read_answer
from ..approvals.verdicts import RecordedResult
from ..models import Approval
from ..models.rules import GrantScope
from ..rules.grants import Allow

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


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
        verdict: str = self.cleaned_data["verdict"]
        return verdict != "deny"

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

    label: StrOrPromise
    effect: StrOrPromise


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
