"""The tables behind durable runs, one module a concept: a run and its history
(:mod:`.runs`), its step journal (:mod:`.steps`), the calls it asks people about
(:mod:`.approvals`), its stream journal (:mod:`.stream`), standing rules and grants
(:mod:`.rules`), the notification delivery log (:mod:`.deliveries`) and what people said
to runs as they ran (:mod:`.inputs`), and the hash-chained audit trail (:mod:`.audit`).

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
from .deliveries import Delivery, DeliveryChannel, DeliveryStatus
from .inputs import RunInput
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

StreamEntry = StreamJournalEntry  # its 0.1 name

__all__ = [
    "IN_DOUBT",
    "RUN_ID_PATTERN",
    "Approval",
    "ApprovalKind",
    "ApprovalQuerySet",
    "ApprovalStatus",
    "AuditAction",
    "AuditChainHead",
    "AuditRecord",
    "Dashboard",
    "Delivery",
    "DeliveryChannel",
    "DeliveryStatus",
    "Grant",
    "GrantScope",
    "LeaseHolder",
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
]
