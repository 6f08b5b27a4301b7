"""The pure-Python runtime: a port of ``@deuz-sdk/core``'s agentic loop. Never imports Django.

>>> from deuz_django.core import generate_text, tool
>>> from deuz_django.core.testing import ScriptedModel, reply
"""

from ._loop.options import PrepareStepInfo, StepOverrides
from ._loop.settle import waiting_client_calls
from .abort import AbortController, AbortSignal, TurnInterrupter
from .agents import agent_tool
from .approvals import ToolApprovalRequest, ToolApprovalResponse
from .ask_human import ask_human
from .comparison import Comparison, compare_transcripts
from .deps import Clock, Deps, PriceProvider, SystemClock
from .exceptions import (
    CheckpointNotFoundError,
    DeuzError,
    InvalidInputError,
    MalformedEventError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    Problem,
    ProviderNotInstalledError,
    RateLimitError,
    ReplayDiverged,
    RunCompletedError,
    ScriptExhaustedError,
)
from .generate import (
    CallOptions,
    GenerateOptions,
    StreamChatResult,
    generate_text,
    stream_chat,
)
from .messages import (
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from .model import ForcedTool, LanguageModel, ModelEvent, ModelRequest, ToolDefinition
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
from .questions import Question
from .reconciliation import Reconciliation
from .replay import RecordedOutcome, RecordedOutcomes, replay_input, replay_tools
from .results import GenerateTextResult, StepResult
from .stop import (
    StepInfo,
    StopCondition,
    cost_exceeds,
    duration_exceeds,
    has_tool_call,
    step_count_is,
    total_tokens_exceed,
)
from .tools import Tool, ToolCall, ToolContext, ToolResult, tool
from .usage import EMPTY_USAGE, FinishReason, Usage

__all__ = [
    "EMPTY_USAGE",
    "AbortController",
    "AbortSignal",
    "CallOptions",
    "CheckpointNotFoundError",
    "Clock",
    "Comparison",
    "CostPart",
    "DataPart",
    "Deps",
    "DeuzError",
    "ErrorPart",
    "FinishPart",
    "FinishReason",
    "ForcedTool",
    "GenerateOptions",
    "GenerateTextResult",
    "ImagePart",
    "InvalidInputError",
    "LanguageModel",
    "MalformedEventError",
    "Message",
    "ModelConnectionError",
    "ModelError",
    "ModelEvent",
    "ModelHTTPError",
    "ModelRequest",
    "ModelTimeoutError",
    "Part",
    "PrepareStepInfo",
    "PriceProvider",
    "Problem",
    "ProviderNotInstalledError",
    "Question",
    "RateLimitError",
    "ReasoningDeltaPart",
    "ReasoningPart",
    "Reconciliation",
    "RecordedOutcome",
    "RecordedOutcomes",
    "ReplayDiverged",
    "RunCompletedError",
    "ScriptExhaustedError",
    "StepFinishPart",
    "StepInfo",
    "StepOverrides",
    "StepResult",
    "StepStartPart",
    "StopCondition",
    "StreamChatResult",
    "StreamPart",
    "SubAgentPart",
    "SystemClock",
    "TextDeltaPart",
    "TextPart",
    "Tool",
    "ToolApprovalRequest",
    "ToolApprovalRequestPart",
    "ToolApprovalResponse",
    "ToolCall",
    "ToolCallDeltaPart",
    "ToolCallPart",
    "ToolContext",
    "ToolDefinition",
    "ToolOutputPart",
    "ToolResult",
    "ToolResultPart",
    "ToolStatePart",
    "ToolUsePart",
    "TurnInterrupter",
    "Usage",
    "agent_tool",
    "ask_human",
    "compare_transcripts",
    "cost_exceeds",
    "duration_exceeds",
    "generate_text",
    "has_tool_call",
    "replay_input",
    "replay_tools",
    "step_count_is",
    "stream_chat",
    "tool",
    "total_tokens_exceed",
    "waiting_client_calls",
]
