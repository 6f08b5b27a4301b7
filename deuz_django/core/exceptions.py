"""Errors raised by the core runtime.

The hierarchy::

    DeuzError                     root of every error the core raises on purpose
    ├── InvalidInputError         a message, part or option failed validation (ValueError)
    │   └── InvalidForkError      a fork point or edit that does not fit the run forked
    ├── ModelError                a model call failed
    │   ├── ModelHTTPError        the provider answered with an HTTP error status
    │   │   └── RateLimitError    ... 429
    │   ├── ModelTimeoutError     no answer in time (also the per-step deadline)
    │   ├── ModelConnectionError  the transport broke (refused, reset, mid-stream disconnect)
    │   └── MalformedEventError   the provider sent an event the adapter cannot read
    ├── ScriptExhaustedError      a ScriptedModel ran out of replies
    ├── ProviderNotInstalledError the optional SDK for a provider is missing (ImportError)
    ├── CheckpointNotFoundError   resume of a run id the store does not know
    ├── RunCompletedError         resume of a run whose checkpoint is ``completed`` (D5)
    ├── RunExistsError            a new run (a fork) under a run id that is taken
    ├── InputArrived              a ``completed`` checkpoint refused: input arrived that
    │                             its history does not hold (the loop steps on instead)
    ├── UnauthorizedExecution     a call was about to run on a decision that does not
    │                             authorize it (another call's, or one used already)
    ├── ReplayDiverged            a replayed model asked for a call the original run has
    │                             no recorded outcome of: not executed, the leg ends
    ├── JournalFenced             (core.journal) a stale leg's append, refused
    ├── JournalUnavailable        (core.journal) a leg's end the journal could not store
    └── WebhookSignatureError     a webhook's signature is missing, malformed or forged
        └── WebhookSignatureExpired  ... or valid but too old (or new): a replay

Approval is data (``pending_approvals`` on a result), never an exception.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# One step of a field path: a name (``.role``) or an index (``[0]``).
_STEP = re.compile(r"\.?([A-Za-z_][\w-]*)|\[(\d+)\]")
# The path every message of the form "messages[0].role: expected ..." starts with.
_PATH = re.compile(r"(?:[A-Za-z_][\w-]*|\[\d+\])(?:\.[A-Za-z_][\w-]*|\[\d+\])*")


@dataclass(frozen=True, slots=True)
class Problem:
    """What is wrong with one piece of input, and where: ``path`` names it step by step
    (``("messages", 0, "role")``; ``()`` for the input as a whole), ``message`` says
    what is wrong. Every surface reports validation failures as problems — an API
    error item, an error frame — so none of them parses text."""

    path: tuple[str | int, ...]
    message: str

    @property
    def field(self) -> str:
        """The path as the API spells it: ``messages[0].role`` (``""``: none)."""
        text = ""
        for step in self.path:
            text += (
                f"[{step}]" if isinstance(step, int) else f".{step}" if text else step
            )
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.path else self.message

    @classmethod
    def at(cls, field: str, message: str) -> Problem:
        """The problem at the field path ``field`` (``messages[0].role``)."""
        path: list[str | int] = []
        for name, index in _STEP.findall(field):
            path.append(int(index) if index else name)
        return cls(tuple(path), message)


class DeuzError(Exception):
    """Base class of every error the runtime raises deliberately."""

    code = "deuz_error"


class InvalidInputError(DeuzError, ValueError):
    """Input (a message dict, a part, an option) is not of the documented shape; its
    :attr:`problem` says where and what. Raised with the text ``"<field path>:
    <what is wrong>"`` (``InvalidInputError("messages[0].role: expected a string")``)
    the path is read from it once, here."""

    code = "invalid_input"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        head, separator, rest = message.partition(": ")
        at_field = separator and _PATH.fullmatch(head) is not None
        self.problem = Problem.at(head, rest) if at_field else Problem((), message)


class ModelError(DeuzError):
    """A model call failed; ``provider`` names the adapter that raised it."""

    code = "model_error"

    def __init__(self, message: str, *, provider: str = "") -> None:
        super().__init__(message)
        self.provider = provider


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error status."""

    code = "model_http_error"

    def __init__(self, message: str, *, provider: str = "", status_code: int) -> None:
        super().__init__(message, provider=provider)
        self.status_code = status_code


class RateLimitError(ModelHTTPError):
    """The provider refused the call for rate or quota reasons (HTTP 429)."""

    code = "rate_limited"


class ModelTimeoutError(ModelError):
    """The model did not answer in time."""

    code = "model_timeout"


class ModelConnectionError(ModelError):
    """The connection to the provider failed or dropped mid-stream."""

    code = "model_connection_error"


class MalformedEventError(ModelError):
    """The provider sent an event the adapter could not interpret."""

    code = "malformed_event"


class ScriptExhaustedError(DeuzError):
    """A :class:`~deuz_django.core.testing.ScriptedModel` was called more times than scripted."""

    code = "script_exhausted"


class ProviderNotInstalledError(DeuzError, ImportError):
    """The SDK behind a provider is an optional extra that is not installed."""

    code = "provider_not_installed"


class CheckpointNotFoundError(DeuzError):
    """No checkpoint is stored for the run id (SPEC R7.3)."""

    code = "checkpoint_not_found"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"No checkpoint found for runId '{run_id}'.")
        self.run_id = run_id


class RunCompletedError(DeuzError):
    """The run's latest checkpoint is ``completed``; resuming it would re-drive the model (D5)."""

    code = "run_completed"

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"Run '{run_id}' is completed; resuming it would call the model again. "
            "To continue the conversation, load the checkpoint, append the new messages "
            "and call generate_text/stream_chat with the same session (the escape hatch)."
        )
        self.run_id = run_id


class InputArrived(DeuzError):
    """A store with an input queue refused to save a ``completed`` checkpoint: the run
    has accepted input its history does not hold (it came in as the model finished).
    The loop delivers it and takes one more step; the run never completes with input
    unanswered (:mod:`deuz_django.core.durable.inputs`)."""

    code = "input_arrived"

    def __init__(self, run_id: str, seqs: tuple[int, ...]) -> None:
        super().__init__(
            f"Run '{run_id}' has input it has not answered yet "
            f"(seq {', '.join(map(str, seqs))}); it does not complete."
        )
        self.run_id = run_id
        self.seqs = seqs


class WebhookSignatureError(DeuzError, ValueError):
    """A webhook request is not signed by the holder of the secret: its signature or
    timestamp header is missing or malformed, or the signature does not match the body
    (:func:`deuz_django.core.webhooks.verify_signature`)."""

    code = "webhook_signature_invalid"


class WebhookSignatureExpired(WebhookSignatureError):
    """A correctly signed webhook request whose timestamp is outside the tolerance: a
    replay of an old request (or a clock far off)."""

    code = "webhook_signature_expired"


class UnauthorizedExecution(DeuzError):
    """A call was about to run on a decision that does not authorize it: one made for
    another call, for another input, or already used by an execution. The call does not
    run; the step journal refused its start."""

    code = "unauthorized_execution"


class InvalidForkError(InvalidInputError):
    """A fork of a run at a step it does not have, or with an edit that does not fit
    that step (:mod:`deuz_django.core.durable.forking`); :attr:`problem` names the
    input at fault (``step``, ``withTurn``, ``edit.message``, ``edit.toolCallId``,
    ``edit.input``)."""

    code = "invalid_fork"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")


class RunExistsError(DeuzError):
    """A new run was to be written under a run id another run holds already."""

    code = "run_exists"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"Run '{run_id}' already exists.")
        self.run_id = run_id


class ReplayDiverged(DeuzError):
    """A replay's model asked for a call the original run has no recorded outcome of —
    one it never made, or made fewer times (:mod:`deuz_django.core.replay`). The call is
    not executed: the leg ends there, with this as its error; ``recorded`` is how many
    outcomes of that very call (same tool, same input) the original has."""

    code = "replay_diverged"

    def __init__(self, tool_name: str, input: Any, *, recorded: int) -> None:
        call = f"{tool_name}({_shown(input)})"
        if recorded:
            times = "once" if recorded == 1 else f"{recorded} times"
            said = (
                f"The replayed model asked for {call} more often than the original "
                f"run did ({times})"
            )
        else:
            said = (
                f"The replayed model asked for {call}, which the original run never "
                "made"
            )
        super().__init__(f"{said}; it was not executed, and the replay stops here.")
        self.tool_name = tool_name
        self.input = input
        self.recorded = recorded


def _shown(value: Any, limit: int = 200) -> str:
    """A call's input as one line of JSON, cut to ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)
    return text if len(text) <= limit else f"{text[: limit - 1]}…"
