"""The tables behind durable runs, one module a concept: a run and its history
(:mod:`.runs`), its step journal (:mod:`.steps`), the calls it asks people about
(:mod:`.approvals`), its stream journal (:mod:`.stream`), standing rules and grants
(:mod:`.rules`), delegated approval rights (:mod:`.delegations`), the votes of calls
that need several approvals (:mod:`.votes`), the notification delivery log
(:mod:`.deliveries`), what people said to runs as they ran (:mod:`.inputs`), the A2A
context and push configs of a run (:mod:`.contexts`, :mod:`.push_configs`), and the
hash-chained audit trail (:mod:`.audit`).

A checkpoint save writes only what changed: the run row (counters, status, lease check) and
the messages appended since the previous save, so its cost does not grow with history.
Messages and journal parts are stored as the checkpoint codec's JSON text (bytes-safe).
"""

from .approvals import (
    IN_DOUBT,
    Approval,
    ApprovalKind,
    ApprovalQuerySet,
    ApprovalStatus,
)
from .audit import AuditAction, AuditChainHead, AuditRecord
from .contexts import TaskContext
from .delegations import Delegation
from .deliveries import Delivery, DeliveryChannel, DeliveryStatus
from .inputs import RunInput
from .push_configs import PushConfig
from .rules import Grant, GrantScope, RuleAction, StandingRule
from .runs import (
    RUN_ID_PATTERN,
    Dashboard,
    LeaseHolder,
    Run,
    RunMessage,
    RunQuerySet,
    RunStatus,
)
from .steps import RunCall, RunStep
from .stream import StreamJournalEntry
from .votes import ApprovalVote

StreamEntry = StreamJournalEntry  # its 0.1 name

__all__ = [
    "IN_DOUBT",
    "RUN_ID_PATTERN",
    "Approval",
    "ApprovalKind",
    "ApprovalQuerySet",
    "ApprovalStatus",
    "ApprovalVote",
    "AuditAction",
    "AuditChainHead",
    "AuditRecord",
    "Dashboard",
    "Delegation",
    "Delivery",
    "DeliveryChannel",
    "DeliveryStatus",
    "Grant",
    "GrantScope",
    "LeaseHolder",
    "PushConfig",
    "RuleAction",
    "Run",
    "RunCall",
    "RunInput",
    "RunMessage",
    "RunQuerySet",
    "RunStatus",
    "RunStep",
    "StandingRule",
    "StreamJournalEntry",
    "TaskContext",
]
