"""Usage arithmetic and finish reasons (SPEC R1.6–R1.10)."""

from __future__ import annotations

from typing import get_args

from deuz_django.core import EMPTY_USAGE, FinishReason, Tool, Usage, generate_text
from deuz_django.core.testing import ScriptedModel, reply
from deuz_django.core.usage import sum_usage, with_total


def test_usage_json_has_the_seven_required_keys_in_order() -> None:
    # SPEC R1.6
    assert list(Usage().to_json()) == [
        "inputTokens",
        "outputTokens",
        "reasoningTokens",
        "cachedReadTokens",
        "cacheWriteTokens",
        "cacheWrite1hTokens",
        "totalTokens",
    ]


def test_empty_usage_is_all_zeros_without_optional_fields() -> None:
    # SPEC R1.7
    assert EMPTY_USAGE.to_json() == dict.fromkeys(Usage().to_json(), 0)
    assert EMPTY_USAGE.audio_tokens is None
    assert EMPTY_USAGE.server_tool_uses is None


def test_sum_usage_adds_every_required_field() -> None:
    # SPEC R1.8
    a = Usage(
        input_tokens=1,
        output_tokens=2,
        reasoning_tokens=3,
        cached_read_tokens=4,
        cache_write_tokens=5,
        cache_write_1h_tokens=6,
        total_tokens=7,
    )
    assert sum_usage(a, a).to_json() == {k: 2 * v for k, v in a.to_json().items()}


def test_sum_usage_keeps_optional_fields_only_when_their_sum_is_positive() -> None:
    # SPEC R1.8
    with_audio = Usage(audio_tokens=3)
    assert sum_usage(with_audio, Usage()).audio_tokens == 3
    assert "audioTokens" in sum_usage(with_audio, Usage()).to_json()
    zero = sum_usage(Usage(audio_tokens=0, server_tool_uses=0), Usage())
    assert "audioTokens" not in zero.to_json()
    assert "serverToolUses" not in zero.to_json()


def test_with_total_keeps_a_reported_total() -> None:
    # SPEC R1.9
    reported = Usage(input_tokens=1, output_tokens=1, total_tokens=10)
    assert with_total(reported) is reported


def test_with_total_fills_input_plus_output_when_the_total_is_zero() -> None:
    # SPEC R1.9
    assert with_total(Usage(input_tokens=4, output_tokens=3)).total_tokens == 7


async def test_result_usage_is_with_total_of_the_summed_steps() -> None:
    # SPEC R1.9: applied when results are published, not per step before summing.
    async def execute(args: object, ctx: object) -> str:
        return "ok"

    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "t", {})], usage=Usage(input_tokens=5)),
            reply(text="done", usage=Usage(output_tokens=2)),
        ]
    )
    result = await generate_text(
        model=model, prompt="go", tools=[Tool(name="t", execute=execute)], max_steps=2
    )
    assert result.usage.total_tokens == 7
    assert [s.usage.total_tokens for s in result.steps] == [0, 0]


async def test_a_mix_of_reported_and_missing_totals_under_counts_as_the_reference() -> (
    None
):
    # SPEC R1.9 quirk, mirrored: one step reports a total, the other reports 0.
    async def execute(args: object, ctx: object) -> str:
        return "ok"

    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "t", {})], usage=(10, 5)),  # total 15
            reply(
                text="done", usage=Usage(input_tokens=20, output_tokens=6)
            ),  # total 0
        ]
    )
    result = await generate_text(
        model=model, prompt="go", tools=[Tool(name="t", execute=execute)], max_steps=2
    )
    assert result.usage.total_tokens == 15


def test_finish_reasons_are_the_six_of_the_reference() -> None:
    # SPEC R1.10
    assert set(get_args(FinishReason)) == {
        "stop",
        "length",
        "tool_calls",
        "content_filter",
        "error",
        "aborted",
    }
