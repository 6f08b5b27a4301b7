"""The checkpoint: a plain-data snapshot of a run at a step boundary (SPEC R6.3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..approvals import ToolApprovalRequest
from ..exceptions import InvalidInputError
from ..messages import Message, message_from_json
from ..usage import Usage

CheckpointStatus = Literal["running", "suspended", "completed"]
CHECKPOINT_STATUSES: frozenset[str] = frozenset(get_args(CheckpointStatus))
CHECKPOINT_VERSION = 1

# Where a JSON tree orders its keys unlike ``to_json``: per object its keys in the order
# read (``None`` when already ours), and the same for the children that differ.
type _KeyOrder = tuple[tuple[str, ...] | None, dict[str | int, _KeyOrder]]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCheckpoint:
    """What a store keeps per run: the full immutable history plus the run's counters.

    ``usage`` is cumulative over every leg of the run; ``step_index`` counts every boundary
    ever saved; ``pending_approvals`` is set on an approval break; ``agent_path`` on the
    checkpoints of sub-agents.

    A checkpoint read with :meth:`from_json` writes its keys back in the order it read
    them, so a stored checkpoint round-trips byte for byte (R8.6); one built in Python, or
    derived with ``dataclasses.replace``, writes R6.3's order.
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
    _key_order: _KeyOrder | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def to_json(self) -> dict[str, Any]:
        """The JSON form, keys in the reference's order, or in the order they were read
        (bytes stay ``bytes``)."""
        out: dict[str, Any] = {
            "version": self.version,
            "runId": self.run_id,
            "stepId": self.step_id,
            "stepIndex": self.step_index,
            "status": self.status,
            "messages": [m.to_json() for m in self.messages],
            "usage": self.usage.to_json(),
        }
        if self.pending_approvals:
            out["pendingApprovals"] = [r.to_json() for r in self.pending_approvals]
        if self.agent_path:
            out["agentPath"] = list(self.agent_path)
        out["createdAt"] = self.created_at
        if self._key_order is not None:
            ordered: dict[str, Any] = _reorder(out, self._key_order)
            return ordered
        return out

    @classmethod
    def from_json(cls, data: Any) -> AgentCheckpoint:
        """Validate the JSON form; an unknown ``version`` is refused, never guessed at."""
        if not isinstance(data, dict):
            raise InvalidInputError(
                f"checkpoint: expected an object, got {type(data).__name__}"
            )
        version = data.get("version")
        if version != CHECKPOINT_VERSION:
            raise InvalidInputError(
                f"checkpoint.version: unsupported checkpoint schema version {version!r} "
                f"(this runtime reads version {CHECKPOINT_VERSION})"
            )
        for key in ("runId", "stepId"):
            if not isinstance(data.get(key), str):
                raise InvalidInputError(f"checkpoint.{key}: expected a string")
        step_index = data.get("stepIndex")
        if isinstance(step_index, bool) or not isinstance(step_index, int):
            raise InvalidInputError("checkpoint.stepIndex: expected an integer")
        status = data.get("status")
        if status not in CHECKPOINT_STATUSES:
            raise InvalidInputError(
                f"checkpoint.status: expected running, suspended or completed, got {status!r}"
            )
        raw_messages = data.get("messages")
        if not isinstance(raw_messages, list):
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
        checkpoint = cls(
            version=version,
            run_id=data["runId"],
            step_id=data["stepId"],
            step_index=step_index,
            status=status,
            messages=tuple(
                message_from_json(m, path=f"checkpoint.messages[{i}]")
                for i, m in enumerate(raw_messages)
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
            created_at=created_at,
        )
        order = _order_of(data, checkpoint.to_json())
        if order is not None:
            object.__setattr__(checkpoint, "_key_order", order)
        return checkpoint


def _order_of(read: Any, written: Any) -> _KeyOrder | None:
    """Where the JSON value ``read`` orders its keys unlike ``written``; ``None`` if nowhere."""
    children: dict[str | int, _KeyOrder] = {}
    if read is written:  # user data (tool inputs, results) is kept as it was read
        return None
    if isinstance(read, dict) and isinstance(written, dict):
        keys = tuple(read)
        own = keys if keys != tuple(written) else None
        for key in keys:
            if key in written and (order := _order_of(read[key], written[key])):
                children[key] = order
    elif isinstance(read, list) and isinstance(written, list):
        own = None
        for index, (a, b) in enumerate(zip(read, written, strict=False)):
            if order := _order_of(a, b):
                children[index] = order
    else:
        return None
    return (own, children) if own is not None or children else None


def _reorder(value: Any, order: _KeyOrder) -> Any:
    """``value`` with its keys in ``order``; keys ``order`` does not name come last."""
    own, children = order
    if isinstance(value, dict):
        keys = (
            [k for k in own if k in value] + [k for k in value if k not in own]
            if own
            else list(value)
        )
        return {
            k: _reorder(value[k], children[k]) if k in children else value[k]
            for k in keys
        }
    if isinstance(value, list):
        return [
            _reorder(v, children[i]) if i in children else v
            for i, v in enumerate(value)
        ]
    return value
