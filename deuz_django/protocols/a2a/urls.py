"""The routes of the HTTP+JSON binding, per agent: included by the API under ``a2a/``
(``/api/deuz/a2a/<agent>/``), the card at ``<agent>/.well-known/agent-card.json``."""

from __future__ import annotations

from django.urls import re_path

from . import views

AGENT = r"^(?P<agent>[A-Za-z0-9_.-]+)/"
TASK = r"tasks/(?P<task_id>[A-Za-z0-9_-]{1,100})"

urlpatterns = [
    re_path(AGENT + r"\.well-known/agent-card\.json$", views.card, name="a2a-card"),
    re_path(AGENT + r"message:send$", views.message_send, name="a2a-send"),
    re_path(AGENT + r"message:stream$", views.message_stream, name="a2a-stream"),
    re_path(AGENT + r"tasks$", views.list_tasks, name="a2a-tasks"),
    re_path(AGENT + TASK + r"$", views.get_task, name="a2a-task"),
    re_path(AGENT + TASK + r":cancel$", views.cancel_task, name="a2a-cancel"),
    re_path(AGENT + TASK + r":subscribe$", views.subscribe, name="a2a-subscribe"),
    re_path(
        AGENT + TASK + r"/pushNotificationConfigs(?:/(?P<config_id>[^/]+))?$",
        views.push_configs,
        name="a2a-push-configs",
    ),
]
