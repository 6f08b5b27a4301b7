"""The test settings' URLs: the example project's, and a page of nothing but the chat
component (``/test/chat/?agent=<name>``), which the browser tests mount it on away from
the demo's page, styles and example questions."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.template import engines
from django.urls import path

from example_project.urls import urlpatterns as example_urlpatterns

PAGE = """{% load deuz_chat %}<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>The chat component</title>
  <link rel="icon" href="data:,">
  <style>
    body { margin: 0; height: 100dvh; display: flex; flex-direction: column; }
    deuz-chat { flex: 1; --deuz-accent: #0b6e69; --deuz-radius: 4px; }
  </style>
</head>
<body>
  {% deuz_chat agent=agent prompts=prompts %}
</body>
</html>
"""


@login_required
def chat_component(request: HttpRequest) -> HttpResponse:
    template = engines["django"].from_string(PAGE)
    context = {
        "agent": request.GET.get("agent", "asker"),
        "prompts": request.GET.getlist("prompt"),
    }
    return HttpResponse(template.render(context, request))


urlpatterns = [
    path("test/chat/", chat_component, name="test-chat-component"),
    *example_urlpatterns,
]
