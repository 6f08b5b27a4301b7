"""Priced agents for the dashboard tests: their runs are seeded, never driven, so their
models only need an id the price table knows."""

from __future__ import annotations

from deuz_django.core import Deps
from deuz_django.core.providers import DEFAULT_PRICES
from deuz_django.core.testing import FunctionModel, reply
from deuz_django.registry import AgentSpec


def _priced(model_id: str) -> AgentSpec:
    return AgentSpec(
        model=FunctionModel(lambda request: reply(text="ok"), model_id=model_id),
        options={"deps": Deps(price_provider=DEFAULT_PRICES)},
    )


support = _priced("gpt-4.1-mini")
research = _priced("claude-haiku-4-5")
