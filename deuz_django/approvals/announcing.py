"""The traces a recorded verdict leaves: its ``await_approval`` span and, once its
transaction commits, the ``approval_decided`` signal — wherever the verdict was written."""

from __future__ import annotations

from datetime import datetime

from ..core import tracing
from ..models import Approval
from ..signals import approval_decided, send_on_commit


def announce_verdict(approval: Approval) -> None:
    """A recorded verdict leaves its traces: the ``await_approval`` span and, once its
    transaction commits, the ``approval_decided`` signal."""
    trace_verdict(approval)
    send_on_commit(approval_decided, Approval, approval=approval)


def trace_verdict(approval: Approval) -> None:
    """The wait for a recorded verdict as an ``await_approval {tool}`` span in the run's
    trace, from the request to the verdict, naming who decided (a no-op unless
    OpenTelemetry records spans). Recorded here, where every verdict is written — by a
    person, an operator, an expiry or a resume that denies what is undecided — so the wait
    shows up when it ends, not only once the run resumes."""
    assert approval.decided_at is not None
    if approval.decided_by_rule_id is not None:
        decider = {"kind": "rule", "rule.id": str(approval.decided_by_rule_id)}
    elif approval.decided_by_grant_id is not None:
        decider = {"kind": "grant", "grant.id": str(approval.decided_by_grant_id)}
    elif approval.operator:
        decider = {"kind": "operator", "operator": approval.operator}
    elif approval.decided_by is not None:
        decider = {
            "kind": "user",
            "user.id": str(approval.decided_by.pk),
            "user.name": str(approval.decided_by.get_username()),
        }
    else:
        decider = {"kind": "system"}
    tracing.record_approval(
        approval.run.trace_context,
        tool_name=approval.tool_name,
        tool_call_id=approval.tool_call_id,
        approval_id=approval.approval_id,
        status=approval.status,
        requested_at_ns=_ns(approval.created_at),
        decided_at_ns=_ns(approval.decided_at),
        decider=decider,
        reason=approval.reason,
    )


def _ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 10**9 + moment.microsecond * 1000
