"""Parts on their way to the people watching a run: the live feed a leg writes to
(:mod:`.live`), a reader following a run's journal and continuing it after a crash
(:mod:`.following`), the WebSocket consumer and its frames (:mod:`.consumers`,
:mod:`.frames`) and the SSE stream of the REST API (:mod:`.sse`).

Public: the routes (:mod:`deuz_django.routing`, :func:`deuz_django.asgi.get_asgi_application`)
and the wire, documented in docs/chat-and-websocket.md.
"""
