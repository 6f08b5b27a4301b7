"""How the API knows who calls it: its own choice, not the project's DRF default.

Token authentication first, when ``rest_framework.authtoken`` is installed (an anonymous
request then gets 401 with ``WWW-Authenticate: Token``), then the Django session (the
browser's, with its CSRF check on unsafe methods). ``DEUZ["API_AUTHENTICATION_CLASSES"]``
— a list of dotted paths — replaces them, for a project that signs its clients in
another way (JWT, OAuth2)."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.utils.module_loading import import_string
from rest_framework.authentication import SessionAuthentication, TokenAuthentication

from ..conf import deuz_settings


def authentication_classes() -> list[type[Any]]:
    configured = deuz_settings.API_AUTHENTICATION_CLASSES
    if configured is not None:
        return [import_string(path) for path in configured]
    if apps.is_installed("rest_framework.authtoken"):
        return [TokenAuthentication, SessionAuthentication]
    return [SessionAuthentication]
