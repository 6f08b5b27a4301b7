"""What the contracts save: a fixed clock and checkpoints as the loop builds them, with
every part type, byte strings, odd text and signed pending approvals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ... import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolApprovalRequest,
    ToolResultPart,
    ToolUsePart,
    Usage,
)
from ...durable import AgentCheckpoint, CheckpointStatus, create_approval_signer

NOW_MS = 1_700_000_000_123


class FixedClock:
    """A clock that never moves, so checkpoints and tokens are reproducible."""

    def __init__(self, now: float = NOW_MS) -> None:
        self._now = now

    def now(self) -> float:
        return self._now

    async def sleep(self, ms: float) -> None:
        return None


def make_checkpoint(
    run_id: str = "run-1",
    step_index: int = 1,
    *,
    status: CheckpointStatus = "running",
    messages: Sequence[Message] | None = None,
    pending_approvals: Sequence[ToolApprovalRequest] | None = None,
    agent_path: Sequence[str] | None = None,
    usage: Usage | None = None,
) -> AgentCheckpoint:
    """A checkpoint as the loop builds one (R6.3), with a one-message default history."""
    return AgentCheckpoint(
        run_id=run_id,
        step_id=f"{run_id}#{step_index}",
        step_index=step_index,
        status=status,
        messages=tuple(
            messages
            if messages is not None
            else (Message("user", f"step {step_index}"),)
        ),
        usage=usage or Usage(input_tokens=10, output_tokens=5, total_tokens=15),
        pending_approvals=tuple(pending_approvals) if pending_approvals else None,
        agent_path=tuple(agent_path) if agent_path else None,
        created_at=NOW_MS + step_index,
    )


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x00"


def rich_history() -> tuple[Message, ...]:
    """Every part type, bytes in images, tool inputs and results, and non-ASCII text."""
    return (
        Message("system", "Du bist knapp. 日本語で答えて。"),
        Message(
            "user",
            (
                TextPart("Crop this ✂️ — naïve café, עברית, 👩🏽‍💻, e\u0301, a\u2028b"),
                ImagePart(PNG, "image/png"),
                ImagePart(b""),
            ),
        ),
        Message(
            "assistant",
            (
                ReasoningPart("Cropping first…", signature="c2lnbmF0dXJl"),
                TextPart("Cropping."),
                ToolUsePart(
                    "toolu_1",
                    "crop",
                    {"image": PNG, "box": [0, 0, 10.5, 20], "label": "Größe"},
                    {"anthropic": {"cacheControl": {"type": "ephemeral"}}},
                ),
            ),
            {"openai": {"refusal": None}},
        ),
        Message(
            "tool",
            (
                ToolResultPart(
                    "toolu_1",
                    {
                        "cropped": b"\x00\x01\xfe\xff",
                        "thumbnail": bytearray(b"\x10\x20"),
                        "nested": [[b"\x7f"], {"empty": b""}],
                        "notes": ["😀", None, True, 3, -0.5],
                    },
                ),
            ),
        ),
        Message("assistant", (ToolUsePart("toolu_2", "upload", {"to": "s3://b/k"}),)),
        Message("tool", (ToolResultPart("toolu_2", "Bucket not found.", True),)),
        Message("assistant", "Fertig — 完了."),
    )


def signed_requests(run_id: str) -> tuple[ToolApprovalRequest, ...]:
    """Two pending approvals, one raised by a nested sub-agent, each with its token."""
    signer = create_approval_signer(secret="contract-secret", clock=FixedClock())
    unsigned = (
        ToolApprovalRequest(
            approval_id="toolu_9",
            tool_call_id="toolu_9",
            tool_name="pay",
            input={"amount": 12.5, "payee": "Zoë Œuvre"},
        ),
        ToolApprovalRequest(
            approval_id="toolu_10",
            tool_call_id="toolu_10",
            tool_name="run_shell",
            input={"cmd": "rm -rf build/"},
            agent_path=("researcher", "coder"),
        ),
    )
    return tuple(replace(r, token=signer.sign(r, run_id)) for r in unsigned)
