"""Test doubles for your tests and ours, and the contract suites your backends can pass.

A scripted model plays canned replies, so a run needs no network and no keys::

    >>> from deuz_django.core.testing import ScriptedModel, reply
    >>> model = ScriptedModel([
    ...     reply(tool_calls=[("toolu_1", "get_weather", {"city": "Oslo"})], usage=(10, 5)),
    ...     reply(text="Sunny in Oslo.", usage=(20, 6)),
    ... ])

:class:`FunctionModel` answers from the request instead (a script that survives a resume
in another process). The shared test suites every ``SessionStore`` and every stream journal
must pass are in :mod:`deuz_django.core.testing.contracts`; that module needs pytest, this
one does not.
"""

from .models import FunctionModel, ScriptedModel, ScriptedReply, reply

__all__ = ["FunctionModel", "ScriptedModel", "ScriptedReply", "reply"]
