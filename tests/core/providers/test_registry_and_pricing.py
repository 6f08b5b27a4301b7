"""``get_model``, the optional SDK extras, the price table and the public surface."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest

import deuz_django.core.providers as providers
from deuz_django.core import (
    Deps,
    InvalidInputError,
    PriceProvider,
    ProviderNotInstalledError,
    Usage,
    cost_exceeds,
    generate_text,
    tool,
)
from deuz_django.core.providers import (
    DEFAULT_PRICES,
    AnthropicModel,
    ModelPrice,
    OpenAIChatModel,
    get_model,
)

from .sse_server import SSEServer, sse


def test_the_public_surface_is_pinned() -> None:
    assert providers.__all__ == [
        "DEFAULT_PRICES",
        "AnthropicModel",
        "ModelPrice",
        "OpenAIChatModel",
        "PriceTable",
        "get_model",
    ]


def test_the_core_imports_without_either_sdk_and_names_the_extra_to_install() -> None:
    script = textwrap.dedent(
        """
        import sys

        class NoSDKs:
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in ("openai", "anthropic"):
                    raise ImportError(f"No module named {name!r}")

        sys.meta_path.insert(0, NoSDKs())
        import deuz_django.core
        from deuz_django.core.providers import get_model
        from deuz_django.core.exceptions import ProviderNotInstalledError

        for spec in ("openai:gpt-4.1-mini", "anthropic:claude-sonnet-4-5"):
            try:
                get_model(spec, api_key="k")
            except ProviderNotInstalledError as error:
                assert isinstance(error, ImportError)
                print(error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == [
        "The 'openai' provider needs the 'openai' package, which is not installed: "
        'pip install "deuz-django[openai]"',
        "The 'anthropic' provider needs the 'anthropic' package, which is not "
        'installed: pip install "deuz-django[anthropic]"',
    ]


def test_a_missing_sdk_is_reported_for_the_compatible_provider_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ProviderNotInstalledError, match=r"deuz-django\[openai\]"):
        get_model("openai-compatible:llama3.1", base_url="http://127.0.0.1:1/v1")


def test_get_model_builds_each_adapter() -> None:
    openai_model = get_model("openai:gpt-4.1-mini", api_key="k")
    anthropic_model = get_model("anthropic:claude-sonnet-4-5", api_key="k")
    compatible = get_model("openai-compatible:llama3.1", base_url="http://h:11434/v1")
    assert isinstance(openai_model, OpenAIChatModel)
    assert isinstance(anthropic_model, AnthropicModel)
    assert isinstance(compatible, OpenAIChatModel)
    assert [m.model_id for m in (openai_model, anthropic_model, compatible)] == [
        "gpt-4.1-mini",
        "claude-sonnet-4-5",
        "llama3.1",
    ]
    assert (openai_model.provider, compatible.provider) == (
        "openai",
        "openai-compatible",
    )
    assert str(compatible.client.base_url) == "http://h:11434/v1/"


@pytest.mark.parametrize(
    ("spec", "options", "problem"),
    [
        (
            "gemini:pro",
            {},
            "unknown provider 'gemini' (known: anthropic, openai, openai-compatible)",
        ),
        ("gpt-4.1", {}, "expected '<provider>:<model>'"),
        ("openai:", {}, "expected '<provider>:<model>'"),
        ("openai-compatible:llama3.1", {}, "needs base_url="),
    ],
)
def test_bad_model_specs_are_invalid_input(
    spec: str, options: dict[str, str], problem: str
) -> None:
    with pytest.raises(
        InvalidInputError, match=problem.replace("(", r"\(").replace(")", r"\)")
    ):
        get_model(spec, **options)


async def test_keys_come_from_the_sdks_environment_variables(
    server: SSEServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-openai-0000000000")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-0000")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.push(sse("openai_text"), sse("anthropic_text"), sse("openai_text"))
    for spec in ("openai:gpt-4.1-mini", "anthropic:claude-sonnet-4-5"):
        model = get_model(spec, max_retries=0)
        await generate_text(model=model, prompt="hi")
        await model.client.close()
    compatible = get_model(
        "openai-compatible:llama3.1", base_url=f"{server.url}/v1", max_retries=0
    )
    await generate_text(model=compatible, prompt="hi")
    await compatible.client.close()
    openai_call, anthropic_call, compatible_call = server.requests
    assert (
        openai_call.headers["authorization"] == "Bearer sk-from-env-openai-0000000000"
    )
    assert "sk-ant-from-env-0000" in (
        anthropic_call.headers.get("x-api-key", "")
        + anthropic_call.headers.get("authorization", "")
    )
    # A third-party server never receives the OpenAI key.
    assert compatible_call.headers["authorization"] == "Bearer not-needed"


def test_default_prices_price_normalized_usage() -> None:
    assert isinstance(DEFAULT_PRICES, PriceProvider)
    openai_usage = Usage(
        input_tokens=1_000_000, cached_read_tokens=2_000_000, output_tokens=500_000
    )
    assert DEFAULT_PRICES.price_usage("gpt-4.1-mini", openai_usage) == pytest.approx(
        0.40 + 2 * 0.10 + 0.5 * 1.60
    )
    anthropic_usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cached_read_tokens=1_000_000,
        cache_write_tokens=1_000_000,
        cache_write_1h_tokens=1_000_000,
    )
    assert DEFAULT_PRICES.price_usage(
        "claude-sonnet-4-5", anthropic_usage
    ) == pytest.approx(3.0 + 15.0 + 0.30 + 3.75 + 6.0)


def test_prices_match_dated_and_prefixed_ids_and_can_be_overridden() -> None:
    usage = Usage(input_tokens=1_000_000)
    assert DEFAULT_PRICES.price_usage("claude-sonnet-4-5-20250929", usage) == 3.0
    assert DEFAULT_PRICES.price_usage("openai:gpt-4.1-mini-2025-04-14", usage) == 0.4
    assert DEFAULT_PRICES.price_usage("llama3.1", usage) is None
    mine = DEFAULT_PRICES.with_prices(
        {
            "llama3.1": ModelPrice(input=0.0, output=0.0),
            "gpt-4.1-mini": ModelPrice(input=1.0, output=2.0),
        }
    )
    assert mine.price_usage("llama3.1", usage) == 0.0
    assert mine.price_usage("gpt-4.1-mini", usage) == 1.0
    assert DEFAULT_PRICES.price_usage("gpt-4.1-mini", usage) == 0.4


@tool
def get_weather(city: str, units: str = "celsius") -> str:
    """The weather for a city."""
    return "cold"


async def test_the_price_table_drives_cost_exceeds(
    server: SSEServer, make_openai: Callable[..., OpenAIChatModel]
) -> None:
    server.push(sse("openai_tool_call"))
    result = await generate_text(
        model=make_openai(),
        prompt="Weather?",
        tools=[get_weather],
        max_steps=5,
        stop_when=cost_exceeds(0.00001),  # the first step costs $0.0000656
        deps=Deps(price_provider=DEFAULT_PRICES),
    )
    assert result.stopped_by == "cost_exceeds"
    assert len(result.steps) == 1
