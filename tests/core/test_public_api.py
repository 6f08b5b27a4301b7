"""The public surface is explicit and pinned (STYLE rule 2, DESIGN §3)."""

from __future__ import annotations

from typing import Any

import deuz_django.core
import deuz_django.core.durable

CORE = {
    "Problem",
    "EMPTY_USAGE",
    "Comparison",
    "RecordedOutcome",
    "RecordedOutcomes",
    "ReplayDiverged",
    "compare_transcripts",
    "replay_input",
    "replay_tools",
    "AbortController",
    "AbortSignal",
    "CallOptions",
    "CheckpointNotFoundError",
    "Clock",
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
    "ProviderNotInstalledError",
    "Question",
    "RateLimitError",
    "ReasoningDeltaPart",
    "ReasoningPart",
    "Reconciliation",
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
    "cost_exceeds",
    "duration_exceeds",
    "generate_text",
    "has_tool_call",
    "step_count_is",
    "stream_chat",
    "tool",
    "total_tokens_exceed",
    "waiting_client_calls",
}

DURABLE = {
    "CHECKPOINT_VERSION",
    "AgentCheckpoint",
    "ApprovalSigner",
    "Authorization",
    "CallRecord",
    "CheckpointNotFoundError",
    "CheckpointStatus",
    "DurableSession",
    "ForkEdit",
    "ForkSource",
    "ForkedRun",
    "ForkingStore",
    "InMemoryInputQueue",
    "InMemorySessionStore",
    "InMemoryStepJournal",
    "InputArrived",
    "InputQueue",
    "InvalidForkError",
    "JournalStep",
    "QueuedInput",
    "RunCompletedError",
    "RunExistsError",
    "SessionStore",
    "StepJournal",
    "TokenProblem",
    "UnauthorizedExecution",
    "child_run_id",
    "child_run_id_prefix",
    "create_approval_signer",
    "create_in_memory_session_store",
    "deserialize_checkpoint",
    "fork_from_checkpoint",
    "is_child_run_id",
    "parent_run_id",
    "plan_fork",
    "resume_from_checkpoint",
    "resume_stream_from_checkpoint",
    "root_run_id",
    "serialize_checkpoint",
    "token_problem",
}


def test_core_all_is_exactly_the_public_names() -> None:
    assert set(deuz_django.core.__all__) == CORE


def test_durable_all_is_exactly_the_public_names() -> None:
    assert set(deuz_django.core.durable.__all__) == DURABLE


def test_all_lists_are_sorted_and_free_of_duplicates() -> None:
    for names in (deuz_django.core.__all__, deuz_django.core.durable.__all__):
        assert list(names) == sorted(set(names), key=lambda n: (not n.isupper(), n))


def test_every_public_name_resolves() -> None:
    for module in (deuz_django.core, deuz_django.core.durable):
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_design_section_3_names_are_importable() -> None:
    # DESIGN §3: the fixed public names.
    from deuz_django.core import Tool, agent_tool, generate_text, stream_chat, tool
    from deuz_django.core.durable import (
        AgentCheckpoint,
        CheckpointNotFoundError,
        DurableSession,
        SessionStore,
        create_approval_signer,
        create_in_memory_session_store,
        deserialize_checkpoint,
        resume_from_checkpoint,
        resume_stream_from_checkpoint,
        serialize_checkpoint,
    )
    from deuz_django.core.testing import ScriptedModel, reply

    assert all(
        callable(x)
        for x in (
            generate_text,
            stream_chat,
            tool,
            agent_tool,
            create_in_memory_session_store,
            serialize_checkpoint,
            deserialize_checkpoint,
            resume_from_checkpoint,
            resume_stream_from_checkpoint,
            create_approval_signer,
            reply,
        )
    )
    assert {Tool, DurableSession, SessionStore, AgentCheckpoint, ScriptedModel}
    assert issubclass(CheckpointNotFoundError, Exception)


def test_the_option_typing_aids_list_exactly_the_declared_options() -> None:
    # One list of call options: LoopOptions declares them, CallOptions and
    # GenerateOptions only type them.
    from deuz_django.core import CallOptions, GenerateOptions
    from deuz_django.core._loop.options import CALL_OPTIONS, FRESH_OPTIONS

    def keys(typed: Any) -> set[str]:
        return set(typed.__required_keys__ | typed.__optional_keys__)

    assert keys(CallOptions) == CALL_OPTIONS
    assert keys(GenerateOptions) == FRESH_OPTIONS
