"""A site that also serves one agent's card at its root (docs/a2a.md)."""

from django.urls import path

from deuz_django.protocols.a2a import views as a2a_views
from example_project.urls import urlpatterns as site

urlpatterns = [
    path(".well-known/agent-card.json", a2a_views.card, {"agent": "scripted"}),
    *site,
]
