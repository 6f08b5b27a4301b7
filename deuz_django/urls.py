"""The app's pages outside the admin and the API — the pages notifications link to:
``path("deuz/", include("deuz_django.urls"))``."""

from __future__ import annotations

from django.urls import path

from .approvals import link_views as action_views

app_name = "deuz_django"

urlpatterns = [
    path(
        "approvals/act/<str:token>/",
        action_views.approval_action,
        name="approval-action",
    ),
]
