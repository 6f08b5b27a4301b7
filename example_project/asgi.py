"""ASGI entry point: HTTP through Django, WebSockets through the deuz consumer.

The socket stack checks the Origin against ALLOWED_HOSTS and authenticates with the Django
session (AuthMiddlewareStack), so the consumer sees ``scope["user"]``.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from deuz_django.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # In development daphne serves the static files too (production: a CDN/whitenoise).
        "http": ASGIStaticFilesHandler(django_application)
        if settings.DEBUG
        else django_application,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
