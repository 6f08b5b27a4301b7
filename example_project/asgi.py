"""ASGI entry point: HTTP through Django, WebSockets through the deuz consumer
(deuz_django.asgi: session-authenticated, Origin checked against ALLOWED_HOSTS)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
from deuz_django.asgi import get_asgi_application

application = get_asgi_application()
