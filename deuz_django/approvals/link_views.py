"""The page an action link opens (:mod:`deuz_django.approvals.links`): the call, and the
buttons that decide it.

Opening the page never decides anything — mail scanners and link previews open links.
A ``POST`` from it (Django's CSRF check applies) records the verdict exactly as the
admin's Approve and Deny do (:func:`deuz_django.approvals.page_verdicts.decide`: the one verdict
pipeline, and the run continued in the background once nothing is left undecided), then
comes back to the page, which now says who decided.

=======================================  ======  ==========================================
the link, the user, the call             status  the page
=======================================  ======  ==========================================
forged, changed or cut short             400     says the link is not valid
older than ``ACTION_LINK_MAX_AGE``       410     says the link expired
nobody signed in                         302     the login page, then back here
the call is gone or its run not visible  404     not found (never "forbidden")
the user may not decide it               403     why (:func:`~deuz_django.permissions.
                                                 decide_refusal`)
decided already                          200     who decided, when and why (409 to a POST)
older than ``APPROVAL_MAX_AGE``          410     says it can no longer be decided
a bad form (an unknown verdict, …)       400     which field, nothing recorded
waiting                                  200     the call and its buttons
=======================================  ======  ==========================================

A question (an approval of kind ``question``) is answered on the page: its link only
opens it, and the form carries the answer (a choice, text, or JSON for a question with a
schema) with *Answer*, or declines with *Decline to answer*. An answer that does not fit
the question is refused by the verdict's check, reported on the page, and not recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from django import forms
from django.contrib.auth.views import redirect_to_login
from django.contrib.messages import get_messages
from django.core import signing
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from ..models import IN_DOUBT, Approval, ApprovalKind
from ..notifications.emails import expires_at
from ..permissions import can_view_run, decide_refusal, is_signed_in
from ..runs.transcript import pretty
from .expiry import is_expired
from .links import DECIDED_BY_LINK, VERDICTS, ActionLink, label, read_token
from .page_verdicts import REASON_MAX_LENGTH, decide, form_problems
from .questions import question_of, read_answer

TEMPLATE = "deuz_django/approval_action.html"


class ActionForm(forms.Form):
    """The verdict a button posts, among those the link and the user allow."""

    verdict = forms.ChoiceField(label=gettext_lazy("Verdict"))
    reason = forms.CharField(
        label=gettext_lazy("Reason (optional)"),
        required=False,
        max_length=REASON_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    answer = forms.CharField(
        label=gettext_lazy("Your answer"),
        required=False,
        max_length=REASON_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
    )

    def __init__(self, *args: Any, verdicts: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        verdict = cast(forms.ChoiceField, self.fields["verdict"])
        verdict.choices = [(v, v) for v in verdicts]


@require_http_methods(["GET", "POST"])
def approval_action(request: HttpRequest, token: str) -> HttpResponse:
    try:
        link = read_token(token)
    except signing.SignatureExpired:
        return page(
            request,
            410,
            title=_("This link has expired"),
            problem=_(
                "Links in notifications work for a limited time. Find the call in "
                "the approval queue instead."
            ),
        )
    except signing.BadSignature:
        return page(
            request,
            400,
            title=_("This link is not valid"),
            problem=_(
                "It was changed or cut short on the way. Open the link from the "
                "message again, whole, or find the call in the approval queue."
            ),
        )
    if not is_signed_in(request.user):
        return redirect_to_login(request.get_full_path())
    approval = _approval(link)
    if approval is None or not can_view_run(request.user, approval.run):
        return page(request, 404, title=_("No such call"), problem=_("No such call."))
    closed = _closed(request, approval)
    if closed is not None:
        return closed
    allowed = [
        verdict
        for verdict in link.verdicts
        if decide_refusal(request.user, approval, approving=VERDICTS[verdict]) is None
    ]
    if not allowed:
        refusal = decide_refusal(
            request.user, approval, approving=VERDICTS[link.verdicts[0]]
        )
        return page(
            request,
            403,
            approval,
            title=_("You may not decide this call"),
            problem=refusal,
        )
    return _decide_form(request, approval, allowed)


def _closed(request: HttpRequest, approval: Approval) -> HttpResponse | None:
    """The page of a call this link cannot decide (any more): decided, too old, or one
    a link does not decide; ``None`` while it can."""
    if not approval.is_pending:
        return page(
            request,
            409 if request.method == "POST" else 200,
            approval,
            title=_("This call was decided already"),
        )
    if is_expired(approval):
        return page(
            request,
            410,
            approval,
            title=_("This call can no longer be decided"),
            problem=_("It waited longer than approvals may wait."),
        )
    if approval.kind not in DECIDED_BY_LINK and approval.kind != ApprovalKind.QUESTION:
        return page(request, 200, approval, title=_("This call waits for you"))
    return None


def _decide_form(
    request: HttpRequest, approval: Approval, allowed: list[str]
) -> HttpResponse:
    """The form of the verdicts ``allowed`` (GET), or the verdict it posts (POST)."""
    form = ActionForm(
        request.POST if request.method == "POST" else None, verdicts=allowed
    )
    if request.method == "GET":
        return page(request, 200, approval, form=form, verdicts=allowed)
    answer, problem = None, None
    if form.is_valid():
        approved = VERDICTS[form.cleaned_data["verdict"]]
        try:
            answer = read_answer(approval, form.cleaned_data["answer"] or "")
        except ValueError as error:
            problem = str(error)
    else:
        problem = form_problems(form)
    if problem is not None:
        return page(
            request,
            400,
            approval,
            title=_("Nothing was recorded"),
            problem=problem,
            form=form,
            verdicts=allowed,
        )
    decide(
        request,
        [approval],
        approved=approved,
        reason=form.cleaned_data["reason"],
        answer=answer if approved else None,
    )
    return HttpResponseRedirect(request.get_full_path())


def _approval(link: ActionLink) -> Approval | None:
    return (
        Approval.objects.select_related("run", "run__owner", "decided_by")
        .filter(pk=link.approval_pk, approval_id=link.approval_id)
        .first()
    )


def page(
    request: HttpRequest,
    status: int,
    approval: Approval | None = None,
    *,
    title: str = "",
    problem: str | None = None,
    form: ActionForm | None = None,
    verdicts: Sequence[str] = (),
) -> TemplateResponse:
    """The page, in every state the module docstring lists."""
    context: dict[str, Any] = {
        "title": title or _("Decide this call"),
        "problem": problem,
        "messages": get_messages(request),
        "approval": approval,
        "form": form,
        "buttons": [(v, label(approval, v)) for v in verdicts] if approval else [],
    }
    if approval is not None:
        question = question_of(approval)
        context.update(
            input=pretty(approval.input),
            edited=None
            if approval.edited_input is None
            else pretty(approval.edited_input),
            in_doubt=IN_DOUBT if approval.kind == ApprovalKind.OUTCOME_UNKNOWN else "",
            question=question,
            schema=""
            if question is None or question.schema is None
            else pretty(question.schema),
            answer=None if approval.answer is None else pretty(approval.answer),
            expires_at=expires_at(approval) if approval.is_pending else None,
            admin_url=_admin_url(request, approval),
        )
    return TemplateResponse(request, TEMPLATE, context, status=status)


def _admin_url(request: HttpRequest, approval: Approval) -> str | None:
    """The call's page in the admin, for staff who may see the approval queue."""
    user = request.user
    if not (user.is_staff and user.has_perm("deuz_django.view_approval")):
        return None
    try:
        return reverse("admin:deuz_django_approval_change", args=[approval.pk])
    except NoReverseMatch:  # the project does not route the admin
        return None
