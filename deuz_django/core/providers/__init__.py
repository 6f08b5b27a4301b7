"""Real model providers over their official SDKs, a registry and a price table.

>>> from deuz_django.core.providers import DEFAULT_PRICES, get_model
>>> model = get_model("anthropic:claude-sonnet-4-5")
>>> result = await generate_text(model=model, prompt="Hi", deps=Deps(price_provider=DEFAULT_PRICES))

The SDKs are optional extras (``pip install "deuz-django[openai]"`` / ``[anthropic]``) and
are imported only when an adapter is built, so importing this package never needs them.
"""

from .anthropic import AnthropicModel
from .openai import OpenAIChatModel
from .pricing import DEFAULT_PRICES, ModelPrice, PriceTable
from .registry import get_model

__all__ = [
    "DEFAULT_PRICES",
    "AnthropicModel",
    "ModelPrice",
    "OpenAIChatModel",
    "PriceTable",
    "get_model",
]
