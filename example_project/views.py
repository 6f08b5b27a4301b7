"""The demo's pages: the chat, its login, and one JSON question the chat asks.

The chat page is plain HTML plus ``static/chat/chat.js``; it talks to the WebSocket
(``/ws/deuz/``) and the REST API (``/api/deuz/``). Nothing secret reaches the browser:
approval tokens arrive inside the run's ``tool-approval-request`` parts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

from deuz_django.deadlines import escalation_label
from deuz_django.models import Approval, Run
from deuz_django.permissions import decide_refusal

AGENT = "assistant"
# The demo's icon: the browser asks every page's site for /favicon.ico (the admin too).
FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect width="32" height="32" rx="7" fill="#417690"/>'
    '<path d="M9 16l5 5 9-10" fill="none" stroke="#fff" stroke-width="3.5" '
    'stroke-linecap="round" stroke-linejoin="round"/></svg>'
)


class DemoLoginView(LoginView):
    """Django's login with the chat's look; in development it names the demo accounts."""

    template_name = "chat/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "demo_hint": settings.DEBUG}


@login_required
@require_GET
def chat(request: HttpRequest) -> HttpResponse:
    """The chat; with ``?run=`` that conversation's title is in the page from the start,
    so a reload never flashes the empty "new conversation" page first."""
    run_id = request.GET.get("run")
    run = (
        Run.objects.for_user(request.user).filter(run_id=run_id).first()
        if run_id
        else None
    )
    return render(request, "chat/index.html", {"agent": AGENT, "run": run})


@require_GET
def run_approvals(request: HttpRequest, run_id: str) -> JsonResponse:
    """Each approval of a run the user sees, and whether the user may approve it.

    The chat shows Approve / Deny (and "Approve and allow for this chat") only where
    ``mayDecide`` is true; elsewhere (a refund, which only finance staff may approve) it
    shows that the call waits for staff. An approval of ``kind`` ``outcome_unknown`` (a
    call a crash left in doubt) is answered with "it happened" (and its result), "run it
    again" or "mark it failed" instead; one of ``kind`` ``question`` is answered with the
    form its request's question asks for. ``automatic`` names the standing rule or grant
    that decided a call, and its reason. A pending call with a deadline says when
    (``secondsLeft``, counted by the server's clock) and what then happens:
    ``escalateTo`` someone, or it times out.
    """
    if not request.user.is_authenticated:
        return JsonResponse(
            {"detail": "Sign in first.", "code": "not_authenticated"}, status=401
        )
    run = Run.objects.for_user(request.user).filter(run_id=run_id).first()
    if run is None:
        return JsonResponse({"detail": "No such run.", "code": "not_found"}, status=404)
    approvals = []
    now = timezone.now()
    rows = run.approvals.select_related(
        "run", "decided_by_rule", "decided_by_grant__run", "decided_by_grant__owner"
    )
    for approval in rows:
        refusal = decide_refusal(request.user, approval, approving=True)
        automatic = approval.automatic
        approvals.append(
            {
                "approvalId": approval.approval_id,
                "kind": approval.kind,
                "toolName": approval.tool_name,
                "status": approval.status,
                "mayDecide": refusal is None,
                "refusal": refusal,
                **_deadline(approval, now),
                "automatic": None
                if automatic is None
                else {"decider": str(automatic), "reason": approval.reason},
            }
        )
    return JsonResponse({"runId": run.run_id, "approvals": approvals})


def _deadline(approval: Approval, now: datetime) -> dict[str, Any]:
    moment = approval.deadline_at if approval.is_pending else None
    return {
        "deadline": None if moment is None else moment.isoformat(),
        "secondsLeft": None
        if moment is None
        else max(0.0, (moment - now).total_seconds()),
        "escalateTo": escalation_label(approval.escalate_to)
        if approval.escalates
        else None,
        "escalatedTo": approval.escalated_to or None,
    }


@require_GET
@cache_control(max_age=86400, public=True)
def favicon(request: HttpRequest) -> HttpResponse:
    return HttpResponse(FAVICON, content_type="image/svg+xml")
