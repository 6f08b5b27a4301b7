"""Automatic decisions: standing rules and grants decide the calls a run suspends on.

Called where a suspended run's approval rows are recorded
(:func:`deuz_django.approvals.asking.record_approvals`), inside the transaction of the
checkpoint that suspends the run, for the new rows of kind ``approval`` only — a call a
crash left in doubt is always a person's to answer. For each call:

1. a matching **deny rule** wins: the call is denied with the rule's reason (when no
   matching deny rule may decide it, the call waits for a person — never approved);
2. else the first matching **approve rule**, then the first matching **grant**, approves.

A rule or grant decides only what the person who made it may decide now
(:func:`deuz_django.permissions.decide_refusal` for the maker: seeing the run, deciding
others' calls, the tool's ``approval_permission``, separation of duties), and an
owner-wide grant never approves a tool with ``approval_by_owner=False``, nor does any
rule or grant approve a call that needs several approvals (an approval chain: deny
rules still deny it); so nothing
automatic approves a call its owner could not have approved by hand. Every decision goes
through :func:`deuz_django.approvals.verdicts.record_verdict` — the approval's stored token
checked, the rule or grant named on the row — and after ``MAX_AUTOMATIC_DECISIONS`` in a
row on one run, a person decides the next call. The run then continues through the one
continuation path once the suspending leg released it (:mod:`deuz_django.runs.claims`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from django.db.models import Max, Q

from ..approvals.verdicts import Verdict, record_verdict, state_refusal
from ..conf import deuz_settings
from ..core.exceptions import DeuzError
from ..models import Approval, ApprovalKind, ApprovalStatus, Grant, Run, StandingRule
from ..models.rules import GrantScope, RuleAction
from ..permissions import approval_tool, decide_refusal
from ..quorum.voting import chain_of
from .conditions import ConditionError, matches

logger = logging.getLogger("deuz_django")


def decide_automatically(approvals: Sequence[Approval]) -> list[Approval]:
    """Decide what standing rules and grants cover among ``approvals`` (new pending rows
    of one run); the rows decided, as recorded."""
    calls = [a for a in approvals if a.kind == ApprovalKind.APPROVAL and a.is_pending]
    if not calls:
        return []
    run = calls[0].run
    tools = {a.tool_name for a in calls}
    rules = list(
        StandingRule.objects.in_force()
        .filter(tool_name__in=tools)
        .filter(Q(agent="") | Q(agent=run.agent))
        .select_related("created_by")
        .order_by("pk")
    )
    grants = list(
        Grant.objects.in_force()
        .filter(tool_name__in=tools, agent=run.agent)
        .filter(Q(scope=GrantScope.RUN, run=run) | _owner_wide(run))
        .select_related("created_by", "run", "owner")
        .order_by("pk")
    )
    if not rules and not grants:
        return []
    budget = int(deuz_settings.MAX_AUTOMATIC_DECISIONS) - _automatic_streak(run)
    decided = []
    for approval in calls:
        if budget <= 0:
            logger.warning(
                "deuz: run %s had %s automatic decisions in a row; %s waits for a "
                "person",
                run.run_id,
                deuz_settings.MAX_AUTOMATIC_DECISIONS,
                approval.approval_id,
            )
            break
        if _decide(approval, rules, grants):
            decided.append(approval)
            budget -= 1
    return decided


def _owner_wide(run: Run) -> Q:
    if run.owner_id is None:
        return Q(pk__in=[])
    return Q(scope=GrantScope.OWNER, owner_id=run.owner_id)


def _automatic_streak(run: Run) -> int:
    """Automatic decisions on the run since the last verdict a person recorded (a user,
    or an operator from a shell). A call the system decided — timed out at its deadline,
    expired — is nobody's verdict: it starts nothing afresh, or a model that keeps
    asking would run unattended, one deadline at a time."""
    decided = run.approvals.exclude(status=ApprovalStatus.PENDING)
    by_person = Q(decided_by__isnull=False) | ~Q(operator="")
    last_person = decided.filter(by_person).aggregate(last=Max("pk"))["last"]
    by_rule_or_grant = Q(decided_by_rule__isnull=False) | Q(
        decided_by_grant__isnull=False
    )
    return decided.filter(by_rule_or_grant, pk__gt=last_person or 0).count()


def _decide(approval: Approval, rules: list[StandingRule], grants: list[Grant]) -> bool:
    """Record the verdict the first rule or grant that covers ``approval`` gives."""
    covering = [r for r in rules if _covers(r, approval)]
    denying = [r for r in covering if r.action == RuleAction.DENY]
    if denying:  # a deny rule wins; one that may not decide leaves it to a person
        return _record(approval, denying, approved=False)
    if chain_of(approval) is not None:
        return False  # a chain's approvals are people's (deuz_django.quorum)
    approving: list[StandingRule | Grant] = [
        *(r for r in covering if r.action == RuleAction.APPROVE),
        *(g for g in grants if _grant_covers(g, approval)),
    ]
    return _record(approval, approving, approved=True)


def _covers(rule: StandingRule, approval: Approval) -> bool:
    try:
        clauses = rule.clauses
    except ConditionError as error:  # stored by hand, past the admin's check
        logger.warning("deuz: %s is ignored: %s", rule, error)
        return False
    return rule.tool_name == approval.tool_name and matches(clauses, approval.input)


def _grant_covers(grant: Grant, approval: Approval) -> bool:
    """Same tool at the same agent path; an owner-wide grant never approves a tool its
    owner may not approve (separation of duties)."""
    if grant.tool_name != approval.tool_name:
        return False
    if list(grant.agent_path or []) != list(approval.agent_path or []):
        return False
    if grant.scope == GrantScope.RUN:
        return True
    try:
        tool = approval_tool(approval)
    except DeuzError:
        return False
    return tool is not None and tool.approval_by_owner


def _record(
    approval: Approval,
    deciders: Iterable[StandingRule | Grant],
    *,
    approved: bool,
) -> bool:
    """Record the verdict of the first decider whose maker may give it now."""
    for decider in deciders:
        maker: Any = decider.created_by
        if maker is None or decide_refusal(maker, approval, approving=approved):
            continue
        verdict = Verdict(approved=approved, reason=_reason(decider))
        refusal = state_refusal(approval, verdict)
        if refusal is not None:  # the stored token fails, or the call expired
            logger.warning(
                "deuz: %s did not decide %s: %s", decider, approval, refusal.problem
            )
            return False
        record_verdict(approval, None, verdict, automatic=decider)
        return True
    return False


def _reason(decider: StandingRule | Grant) -> str:
    if isinstance(decider, StandingRule):
        return decider.reason
    return f"Allowed by {decider}."
