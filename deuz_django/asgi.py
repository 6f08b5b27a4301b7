"""The project's ASGI application in one call: HTTP through Django, and WebSockets —
the deuz consumer's and the project's own — authenticated by the Django session and
checked against ``ALLOWED_HOSTS``.

A project's ``asgi.py`` is then::

    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
    from deuz_django.asgi import get_asgi_application

    application = get_asgi_application()

with ``ASGI_APPLICATION = "mysite.asgi.application"`` in the settings. Its own socket
routes go in ``get_asgi_application(websocket_urlpatterns=[...])``.

The application also starts the server's recovery sweeper (:mod:`deuz_django.runs.recovery`)
with the first scope the server hands it — not as it is built, since ``manage.py check``
imports it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.asgi import get_asgi_application as get_django_application


def get_asgi_application(*, websocket_urlpatterns: Sequence[Any] = ()) -> Any:
    """Django's ASGI application for HTTP (serving static files too while ``DEBUG``,
    as ``runserver`` does) and a WebSocket router with the deuz consumer at
    ``ws/deuz/`` and ``websocket_urlpatterns`` after it."""
    django_application = get_django_application()  # sets Django up: imports follow
    from channels.auth import AuthMiddlewareStack
    from channels.routing import ProtocolTypeRouter, URLRouter
    from channels.security.websocket import AllowedHostsOriginValidator
    from django.apps import apps
    from django.conf import settings
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    from .routing import websocket_urlpatterns as deuz_routes

    serves_static = settings.DEBUG and apps.is_installed("django.contrib.staticfiles")
    router = ProtocolTypeRouter(
        {
            "http": ASGIStaticFilesHandler(django_application)
            if serves_static
            else django_application,
            "websocket": AllowedHostsOriginValidator(
                AuthMiddlewareStack(URLRouter([*deuz_routes, *websocket_urlpatterns]))
            ),
        }
    )
    return SweepingServer(router)


class SweepingServer:
    """An ASGI application that starts this process's recovery sweeper with the first
    scope it is handed (a lifespan startup, a request or a socket): a server heals the
    runs a dead process left without being told which command started it."""

    def __init__(self, application: Any) -> None:
        self.application = application
        self._sweeper_started = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        if not self._sweeper_started:
            from .runs.recovery import start_sweeper

            self._sweeper_started = True
            start_sweeper()
        return await self.application(scope, receive, send)
