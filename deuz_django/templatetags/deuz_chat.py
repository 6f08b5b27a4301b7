"""``{% load deuz_chat %}{% deuz_chat agent="assistant" %}``: the chat component on a page.

It renders the component's stylesheet and script (static files of this app: no CDN, no
build step) and a ``<deuz-chat>`` element whose addresses come from the project's URLs —
the WebSocket route of ``deuz_django.routing``, the runs list of ``deuz_django.api.urls``
(included under the ``deuz`` namespace) and the approvals JSON of ``deuz_django.urls``
— so a page needs nothing else. docs/chat-component.md describes the element.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template
from django.conf import settings
from django.shortcuts import resolve_url
from django.urls import reverse

register = template.Library()

SOCKET = "/ws/deuz/"  # deuz_django.routing.websocket_urlpatterns


@register.inclusion_tag("deuz_django/chat.html")
def deuz_chat(
    agent: str,
    *,
    run: Any = None,
    prompts: Iterable[str] = (),
    placeholder: str = "",
) -> dict[str, Any]:
    """The chat of ``agent``'s runs. ``run`` (a :class:`~deuz_django.models.Run` the page
    shows, e.g. from ``?run=``) puts its title in the page from the start; ``prompts``
    are example questions a click asks; ``placeholder`` is the message box's hint."""
    return {
        "agent": agent,
        "socket": SOCKET,
        "runs_url": reverse("deuz:run-list"),
        "approvals_url": reverse(
            "deuz_django:chat-approvals", kwargs={"run_id": "RUN_ID"}
        ),
        "login_url": resolve_url(settings.LOGIN_URL),
        "run": run,
        "prompts": list(prompts),
        "placeholder": placeholder,
    }
