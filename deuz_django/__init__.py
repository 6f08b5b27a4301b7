"""deuz-django: durable AI-agent runs with humans in the loop, through Django's own tools.

The pure-Python runtime lives in :mod:`deuz_django.core` and never imports Django; the rest
of this package is the Django integration (models, admin, REST API, WebSocket consumer).
"""

from ._moved import install as _install_moved_modules

_install_moved_modules()  # the 0.1 layout's module paths keep working (deuz_django._moved)
