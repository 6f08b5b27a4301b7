"""The demo agent (placeholder until the demo issue): a scripted offline model."""

from deuz_django.core.testing import FunctionModel, reply
from deuz_django.registry import AgentSpec


def _answer(request):  # type: ignore[no-untyped-def]
    return reply(text="Hello from the offline demo model.", usage=(5, 5))


assistant = AgentSpec(model=FunctionModel(_answer, model_id="demo"), system="You help.")
