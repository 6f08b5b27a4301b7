"""deuz-django: durable AI-agent runs with humans in the loop, through Django's own tools.

The pure-Python runtime lives in :mod:`deuz_django.core` and never imports Django; the rest
of this package is the Django integration (models, admin, REST API, WebSocket consumer).
"""
