"""Reasoning blocks keep their own signatures (interleaved thinking) and redaction."""

from __future__ import annotations

from deuz_django.core import (
    ReasoningDeltaPart,
    ReasoningPart,
    TextDeltaPart,
    generate_text,
)
from deuz_django.core.parts import FinishPart
from tests.core.support import RawModel, usage


async def _assistant(events: list[object]) -> tuple[object, ...]:
    model = RawModel([[*events, FinishPart("stop", usage(1, 1))]])  # type: ignore[list-item]
    result = await generate_text(model=model, prompt="go")
    return result.response_messages[0].content  # type: ignore[return-value]


async def test_each_signed_thinking_block_comes_back_with_its_own_signature() -> None:
    # Anthropic closes a thinking block with a signature-only delta; merging two blocks
    # under the last signature would be rejected by the provider on the next turn.
    content = await _assistant(
        [
            ReasoningDeltaPart("first "),
            ReasoningDeltaPart("thought"),
            ReasoningDeltaPart("", "sig-1"),
            TextDeltaPart("Let me check. "),
            ReasoningDeltaPart("second thought"),
            ReasoningDeltaPart("", "sig-2"),
            TextDeltaPart("Done."),
        ]
    )
    assert content[:2] == (
        ReasoningPart("first thought", "sig-1"),
        ReasoningPart("second thought", "sig-2"),
    )


async def test_signatures_on_text_deltas_still_join_into_one_part() -> None:
    # SPEC R1.3: the reference's single joined part with the last signature seen.
    content = await _assistant(
        [
            ReasoningDeltaPart("a ", "s1"),
            ReasoningDeltaPart("b", "s2"),
            TextDeltaPart("x"),
        ]
    )
    assert content[0] == ReasoningPart("a b", "s2")


async def test_a_redacted_payload_keeps_its_redacted_flag() -> None:
    content = await _assistant(
        [
            ReasoningDeltaPart("opaque", encrypted=True, redacted=True),
            TextDeltaPart("x"),
        ]
    )
    assert content[0] == ReasoningPart("opaque", None, encrypted=True, redacted=True)
