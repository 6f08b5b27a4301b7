"""Errors raised by the core runtime.

The hierarchy::

    DeuzError                     root of every error the core raises on purpose
    ├── InvalidInputError         a message, part or option failed validation (ValueError)
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
    ├── JournalFenced             (core.journal) a stale leg's append, refused
    ├── JournalUnavailable        (core.journal) a leg's end the journal could not store
    └── WebhookSignatureError     a webhook's signature is missing, malformed or forged
        └── WebhookSignatureExpired  ... or valid but too old (or new): a replay

Approval is data (``pending_approvals`` on a result), never an exception.
"""

from __future__ import annotations


class DeuzError(Exception):
    """Base class of every error the runtime raises deliberately."""

    code = "deuz_error"


class InvalidInputError(DeuzError, ValueError):
    """Input (a message dict, a part, an option) is not of the documented shape."""

    code = "invalid_input"


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


class WebhookSignatureError(DeuzError, ValueError):
    """A webhook request is not signed by the holder of the secret: its signature or
    timestamp header is missing or malformed, or the signature does not match the body
    (:func:`deuz_django.core.webhooks.verify_signature`)."""

    code = "webhook_signature_invalid"


class WebhookSignatureExpired(WebhookSignatureError):
    """A correctly signed webhook request whose timestamp is outside the tolerance: a
    replay of an old request (or a clock far off)."""

    code = "webhook_signature_expired"
