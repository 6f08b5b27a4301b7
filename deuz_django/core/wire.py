"""The Deuz UI wire: canonical parts mapped to the parts a browser renders (SPEC R11.4–R11.6).

``to_ui_part`` gives the JSON object the original TypeScript client reads, or ``None`` for a
part the wire does not carry. Unlike the reference, ``tool-approval-request`` keeps
``agentPath`` and ``reasoning-delta`` keeps ``encrypted`` (D7): the UI must show which agent
asks. Secrets that look like API keys are redacted from error and denial texts.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from .parts import (
    CostPart,
    DataPart,
    ErrorPart,
    FinishPart,
    ReasoningDeltaPart,
    StepFinishPart,
    StepStartPart,
    StreamPart,
    SubAgentPart,
    TextDeltaPart,
    ToolApprovalRequestPart,
    ToolCallDeltaPart,
    ToolCallPart,
    ToolOutputPart,
    ToolStatePart,
)

WireVersion = Literal["v1", "v2"]

_SECRET_PATTERNS = (
    re.compile(r"sk-ant-[A-Za-z0-9_-]+"),
    re.compile(r"sk-[A-Za-z0-9_-]{16,}"),
    re.compile(r"AIza[A-Za-z0-9_-]{10,}"),
    re.compile(r"Bearer\s+[A-Za-z0-9._-]+", re.IGNORECASE),
)
# Parts only a v2 client understands; a v1 client never sees them (R11.6).
V2_ONLY = frozenset({"tool-state", "cost", "data"})


def redact(text: str) -> str:
    """Replace key-like substrings by ``****`` and their last four characters (R11.5)."""

    def mask(match: re.Match[str]) -> str:
        secret = match.group(0)
        return "****" + secret[-4:] if len(secret) > 4 else "****"

    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(mask, text)
    return text


def to_ui_part(part: StreamPart, version: WireVersion = "v2") -> dict[str, Any] | None:
    """The UI part for ``part``, or ``None`` when the wire drops it."""
    if version == "v1" and part.type in V2_ONLY:
        return None
    match part:
        case TextDeltaPart(text=text):
            return {"type": "text-delta", "text": text}
        case ReasoningDeltaPart():
            out: dict[str, Any] = {"type": "reasoning-delta", "text": part.text}
            if part.signature is not None:
                out["signature"] = part.signature
            if part.encrypted:
                out["encrypted"] = True
            return out
        case ToolCallDeltaPart():
            out = {"type": "tool-input-delta", "toolCallId": part.id}
            if part.name:
                out["toolName"] = part.name
            out["delta"] = part.args_text_delta
            return out
        case StepStartPart(step_index=index):
            return {"type": "step-start", "step": index}
        case StepFinishPart():
            return {
                "type": "step-finish",
                "step": part.step_index,
                "finishReason": part.finish_reason,
                "usage": part.usage.to_json(),
            }
        case ToolCallPart() | ToolOutputPart() | ToolApprovalRequestPart() | CostPart():
            return part.to_json()
        case ToolStatePart():
            out = part.to_json()
            if "deniedReason" in out:
                out["deniedReason"] = redact(out["deniedReason"])
            return out
        case SubAgentPart(agent_path=path, part=inner):
            mapped = to_ui_part(inner, version)
            if mapped is None:
                return None
            return {"type": "sub-agent", "agentPath": list(path), "part": mapped}
        case DataPart(name=name, payload=payload):
            return {"type": f"data-{name}", "payload": payload}
        case FinishPart():
            return {
                "type": "finish",
                "finishReason": part.finish_reason,
                "usage": part.usage.to_json(),
            }
        case ErrorPart(error=error):
            return {"type": "error", "message": redact(str(error))}
    return None  # type: ignore[unreachable]  # R11.4: a part of an unknown type drops
