"""The app's pages outside the admin and the API — the pages notifications link to, and
the JSON the chat component asks: ``path("deuz/", include("deuz_django.urls"))``."""

from __future__ import annotations

from django.urls import path

from .approvals import chat_view
from .approvals import link_views as action_views

app_name = "deuz_django"

urlpatterns = [
    path(
        "approvals/act/<str:token>/",
        action_views.approval_action,
        name="approval-action",
    ),
    path(
        "runs/<str:run_id>/approvals/",
        chat_view.run_approvals,
        name="chat-approvals",
    ),
]
