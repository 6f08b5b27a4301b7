"""The demo's pages: the chat and its login.

The chat page is the package's chat component (``{% deuz_chat %}``, see
docs/chat-component.md) under the demo's top bar, with the demo's example questions; it
talks to the WebSocket (``/ws/deuz/``), the REST API (``/api/deuz/``) and the approvals
JSON of ``deuz_django.urls`` (``/deuz/``). Nothing secret reaches the browser: approval
tokens arrive inside the run's ``tool-approval-request`` parts.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

from deuz_django.models import Run

AGENT = "assistant"
# The example questions the chat offers (a click asks one): the ones README.md suggests.
PROMPTS = (
    "Please refund order A-1001",
    "Please refund $15 on order A-1003",
    "Email me the details",
    "Email me about A-1001 and A-1002",
    "Research the return policy",
)
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
    context = {"agent": AGENT, "run": run, "prompts": PROMPTS}
    return render(request, "chat/index.html", context)


@require_GET
@cache_control(max_age=86400, public=True)
def favicon(request: HttpRequest) -> HttpResponse:
    return HttpResponse(FAVICON, content_type="image/svg+xml")
