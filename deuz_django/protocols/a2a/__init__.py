"""An A2A v1.0 server over the HTTP+JSON binding (https://a2a-protocol.org): every
registered agent is an A2A agent with its own card, a run is a task, and a suspension
for approval or a question is ``TASK_STATE_INPUT_REQUIRED``.

Mount it with the API (``deuz_django.api.urls`` includes :mod:`.urls` under ``a2a/``).
The wire types are the official SDK's (``a2a-sdk``, the ``a2a`` extra): protobuf
messages read and written with protobuf's JSON mapping.
"""
