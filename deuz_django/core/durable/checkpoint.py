"""The checkpoint: a plain-data snapshot of a run at a step boundary (SPEC R6.3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .._jsjson import as_integer
from .._kept import keep
from ..approvals import ToolApprovalRequest
from ..exceptions import InvalidInputError
from ..messages import Message, message_from_json
from ..usage import Usage

CheckpointStatus = Literal["running", "suspended", "completed"]
CHECKPOINT_STATUSES: frozenset[str] = frozenset(get_args(CheckpointStatus))
CHECKPOINT_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCheckpoint:
    """What a store keeps per run: the full immutable history plus the run's counters.

    ``usage`` is cumulative over every leg of the run; ``step_index`` counts every boundary
    ever saved; ``pending_approvals`` is set on an approval break; ``agent_path`` on the
    checkpoints of sub-agents.

    A checkpoint read with :meth:`from_json` writes back the object it read, so a stored
    checkpoint round-trips byte for byte (R8.6): its key order, keys this runtime does not
    know (a newer reference's), an empty ``agentPath`` or ``pendingApprovals`` and ``null``
    optionals all survive, at every level. One built in Python, or derived with
    ``dataclasses.replace``, writes R6.3's order.
    """

    version: int = CHECKPOINT_VERSION
    run_id: str
    step_id: str
    step_index: int
    status: CheckpointStatus
    messages: tuple[Message, ...]
    usage: Usage
    pending_approvals: tuple[ToolApprovalRequest, ...] | None = None
    agent_path: tuple[str, ...] | None = None
    created_at: float
    _json: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def to_json(self) -> dict[str, Any]:
        """The JSON form: R6.3's, or the object read (bytes stay ``bytes``)."""
        messages = [m.to_json() for m in self.messages]
        if self._json is not None:
            out = {**self._json, "messages": messages, "usage": self.usage.to_json()}
            if isinstance(out.get("pendingApprovals"), list):
                out["pendingApprovals"] = [
                    r.to_json() for r in self.pending_approvals or ()
                ]
            return out
        out = {
            "version": self.version,
            "runId": self.run_id,
            "stepId": self.step_id,
            "stepIndex": self.step_index,
            "status": self.status,
            "messages": messages,
            "usage": self.usage.to_json(),
        }
        if self.pending_approvals:
            out["pendingApprovals"] = [r.to_json() for r in self.pending_approvals]
        if self.agent_path:
            out["agentPath"] = list(self.agent_path)
        out["createdAt"] = self.created_at
        return out

    @classmethod
    def from_json(cls, data: Any) -> AgentCheckpoint:
        """Validate the JSON form; an unknown ``version`` is refused, never guessed at.

        Only what would make the run wrong is refused, with the path of the culprit: a
        version other than 1, a known field of the wrong type, an unknown role or part
        type. Anything else is kept as read.
        """
        if not isinstance(data, dict):
            raise InvalidInputError(
                f"checkpoint: expected an object, got {type(data).__name__}"
            )
        step_index = _checked_header(data)
        _check_contents(data)
        raw_pending = data.get("pendingApprovals")
        agent_path = data.get("agentPath")
        checkpoint = cls(
            version=data["version"],
            run_id=data["runId"],
            step_id=data["stepId"],
            step_index=step_index,
            status=data["status"],
            messages=tuple(
                message_from_json(m, path=f"checkpoint.messages[{i}]")
                for i, m in enumerate(data["messages"])
            ),
            usage=Usage.from_json(data.get("usage"), path="checkpoint.usage"),
            pending_approvals=tuple(
                ToolApprovalRequest.from_json(
                    r, path=f"checkpoint.pendingApprovals[{i}]"
                )
                for i, r in enumerate(raw_pending)
            )
            if raw_pending
            else None,
            agent_path=tuple(agent_path) if agent_path else None,
            created_at=data["createdAt"],
        )
        return keep(checkpoint, dict(data))


def _checked_header(data: dict[str, Any]) -> int:
    """Refuse a checkpoint of another version, or whose ids, step index or status are
    wrong; the step index, as an integer (a JSON ``2.0`` is step 2)."""
    version = data.get("version")
    if version != CHECKPOINT_VERSION:
        raise InvalidInputError(
            f"checkpoint.version: unsupported checkpoint schema version {version!r} "
            f"(this runtime reads version {CHECKPOINT_VERSION})"
        )
    for key in ("runId", "stepId"):
        if not isinstance(data.get(key), str):
            raise InvalidInputError(f"checkpoint.{key}: expected a string")
    step_index = as_integer(data.get("stepIndex"))
    if step_index is None:
        raise InvalidInputError("checkpoint.stepIndex: expected an integer")
    status = data.get("status")
    if status not in CHECKPOINT_STATUSES:
        raise InvalidInputError(
            f"checkpoint.status: expected running, suspended or completed, got {status!r}"
        )
    return step_index


def _check_contents(data: dict[str, Any]) -> None:
    """Refuse a history, pending approvals, agent path or creation time of the wrong
    shape, before any message is parsed (each message is checked as it is)."""
    if not isinstance(data.get("messages"), list):
        raise InvalidInputError("checkpoint.messages: expected a list")
    raw_pending = data.get("pendingApprovals")
    if raw_pending is not None and not isinstance(raw_pending, list):
        raise InvalidInputError("checkpoint.pendingApprovals: expected a list")
    agent_path = data.get("agentPath")
    if agent_path is not None and (
        not isinstance(agent_path, list)
        or not all(isinstance(p, str) for p in agent_path)
    ):
        raise InvalidInputError("checkpoint.agentPath: expected a list of strings")
    created_at = data.get("createdAt")
    if isinstance(created_at, bool) or not isinstance(created_at, int | float):
        raise InvalidInputError("checkpoint.createdAt: expected a number")
