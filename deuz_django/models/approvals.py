"""The calls a run asks people about, each bound to its ask — and the verdicts given."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from ..deadlines import escalation_label
from .rules import Grant, StandingRule
from .runs import Run
from .steps import RunCall
from .visibility import Person


class ApprovalKind(models.TextChoices):
    # A gated call asks whether it may run.
    APPROVAL = "approval", _("approval")
    # A call started before a crash and left no outcome: did it happen?
    OUTCOME_UNKNOWN = "outcome_unknown", _("outcome unknown")
    # A question tool's call asks a person; their answer is the call's result.
    QUESTION = "question", _("question")
    # A client tool's call (a tool without execute) waits for the result the client
    # sends (D11); recorded as the verdict's answer, it becomes the call's result.
    CLIENT_TOOL = "client_tool", _("client tool result")


# What an ``outcome_unknown`` approval asks, in the words every surface shows.
IN_DOUBT = _(
    "This call started before a crash and left no outcome, and its tool is not safe "
    "to run twice: did it happen?"
)


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", _("pending")
    APPROVED = "approved", _("approved")
    DENIED = "denied", _("denied")
    EXPIRED = "expired", _("expired")
    # The run was stopped before anyone decided (deuz_django.runs.stopping).
    CANCELLED = "cancelled", _("cancelled")


class ApprovalQuerySet(models.QuerySet["Approval"]):
    def for_user(self, user: Person | None) -> ApprovalQuerySet:
        """The approvals on runs ``user`` may see (deciding them is a separate question)."""
        return self.filter(run__in=Run.objects.for_user(user))

    def pending(self) -> ApprovalQuerySet:
        return self.filter(status=ApprovalStatus.PENDING)

    def newest_first(self) -> ApprovalQuerySet:
        """Latest ask first: the row a call id addresses is its latest ask's (a call
        id the model re-used names its earlier asks too)."""
        return self.order_by(F("step_index").desc(nulls_last=True), "-pk")

    def asked_at(self, run: Run) -> ApprovalQuerySet:
        """The rows of ``run``'s current ask: the calls its latest checkpoint suspended
        on (rows of earlier asks are history, and settle nothing)."""
        return self.filter(run=run, step_index=run.step_index)


class Approval(models.Model):
    """One gated call awaiting (or having received) a verdict — the audit trail.

    An ``outcome_unknown`` row is a call that started before a crash and left no outcome
    (its tool is not ``idempotent``): approving it with a result records that result
    ("it happened"), approving it without one runs it again, denying it marks it failed.
    Rows belong to the root run the user sees, also for calls of sub-agents (``agent_path``).
    A ``question`` row is a question tool's call (``question`` holds what it asks): it is
    approved with the ``answer`` (``decided_by`` answered), which becomes the call's
    result; so is a ``client_tool`` row, a client tool's call waiting for the result the
    client sends. A decided row never changes again.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    approval_id = models.CharField(max_length=200)
    # The ask: the run's checkpoint boundary that suspended on the call (``None`` on
    # rows older than asks). A call asked again at a later boundary — another step or
    # leg, a reused call id, a replayed turn — is a new row, decided anew.
    step_index = models.PositiveIntegerField(null=True, blank=True)
    # The SHA-256 of the input the call was asked with (core.approvals.input_digest):
    # an approving verdict authorizes that input (or the edit it made) only.
    input_digest = models.CharField(max_length=64, blank=True)
    # The tool's definition when the call was asked, and the digest of the one an
    # approving verdict was given on (deuz_django.tool_definitions): a deploy that
    # changes the tool in between is shown to the approver, and a verdict given on an
    # older definition never runs a newer one.
    tool_definition = models.JSONField(null=True, blank=True)
    decided_on_definition = models.CharField(max_length=64, blank=True)
    kind = models.CharField(
        max_length=16, choices=ApprovalKind.choices, default=ApprovalKind.APPROVAL
    )
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200, db_index=True)
    input = models.JSONField(null=True, blank=True)
    agent_path = models.JSONField(default=list, blank=True)
    token = models.TextField(blank=True)
    status = models.CharField(
        max_length=16,
        choices=ApprovalStatus.choices,
        default=ApprovalStatus.PENDING,
        db_index=True,
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="deuz_decisions",
    )
    # A delegate's decision (deuz_django.models.delegations): whose rights it used, and
    # the delegation that lent them; ``decided_by`` is the delegate.
    decided_on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    delegation = models.ForeignKey(
        "deuz_django.Delegation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="decisions",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    # A call whose agent gives its tool an approval chain (deuz_django.quorum): the stage
    # being asked, from 0; its votes are ApprovalVote rows.
    stage = models.PositiveSmallIntegerField(default=0)
    # An operator override (``deuz resume --operator NAME``): the verdict was recorded
    # from a shell without the user permission rules; the name the operator gave.
    operator = models.CharField(max_length=150, blank=True)
    # Edit, then approve: the input a person changed the call to (``input`` keeps the
    # model's). The edit is part of the approving verdict, so its editor is
    # ``decided_by``.
    edited_input = models.JSONField(null=True, blank=True)
    # Questions for a person (deuz_django.approvals.questions): what the call asks (text, and
    # choices or a JSON schema) and the answer its approving verdict gave.
    question = models.JSONField(null=True, blank=True)
    answer = models.JSONField(null=True, blank=True)
    # An automatic decision: the standing rule or the grant that made it (a rule or a
    # grant that decided something is never deleted, only switched off or revoked).
    decided_by_rule = models.ForeignKey(
        StandingRule,
        null=True,
        blank=True,
        on_delete=models.RESTRICT,
        related_name="decisions",
    )
    decided_by_grant = models.ForeignKey(
        Grant,
        null=True,
        blank=True,
        on_delete=models.RESTRICT,
        related_name="decisions",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Deadlines (deuz_django.deadlines), set when the row is recorded: a reminder is due
    # at ``remind_at`` (sent at ``reminded_at``); at ``deadline_at`` the call times out
    # (recorded ``expired``) — unless ``escalate_to`` names whom it goes to first: then
    # once (``escalated_at``) and the deadline moves ``extend_by`` on.
    remind_at = models.DateTimeField(null=True, blank=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    escalate_to = models.CharField(max_length=200, blank=True)
    extend_by = models.DurationField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)

    objects = ApprovalQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        permissions = [
            ("edit_approval_input", "Can edit a call's input before approving it"),
        ]
        constraints = [
            # One row per call per ask (legacy rows, without an ask, are all distinct).
            models.UniqueConstraint(
                fields=["run", "step_index", "approval_id"],
                name="deuz_approval_per_ask",
            ),
            models.CheckConstraint(
                condition=Q(status="pending") | Q(decided_at__isnull=False),
                name="deuz_decided_approval_has_time",
            ),
            models.CheckConstraint(
                condition=Q(decided_by_rule__isnull=True)
                | Q(decided_by_grant__isnull=True),
                name="deuz_approval_one_automatic_decider",
            ),
        ]
        # The dashboard's decision latency by tool (waiting approvals use the status index).
        indexes = [
            models.Index(
                fields=["decided_at", "tool_name"],
                condition=Q(status__in=["approved", "denied"]),
                name="deuz_approval_decided",
            ),
            # The deadline sweep's due deadlines and reminders.
            models.Index(
                fields=["deadline_at"],
                condition=Q(status="pending", deadline_at__isnull=False),
                name="deuz_approval_deadline",
            ),
            models.Index(
                fields=["remind_at"],
                condition=Q(
                    status="pending", remind_at__isnull=False, reminded_at__isnull=True
                ),
                name="deuz_approval_reminder",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.approval_id}) — {self.status}"

    @property
    def is_pending(self) -> bool:
        return self.status == ApprovalStatus.PENDING

    @property
    def escalates(self) -> bool:
        """Its deadline escalates (once) rather than timing the call out."""
        return bool(self.escalate_to) and self.escalated_at is None

    @property
    def escalated_to(self) -> str:
        """Whom its deadline escalated the call to, for people (``""`` before)."""
        return "" if self.escalated_at is None else escalation_label(self.escalate_to)

    @property
    def agent_path_label(self) -> str:
        return " › ".join(self.agent_path or [])

    @property
    def receipt(self) -> RunCall | None:
        """The execution this decision authorized (``None``: none ran on it)."""
        try:
            return self.execution
        except RunCall.DoesNotExist:
            return None

    @property
    def automatic(self) -> StandingRule | Grant | None:
        """The standing rule or grant that decided this call, if one did."""
        return self.decided_by_rule or self.decided_by_grant

    @property
    def decider(self) -> str:
        """Who recorded the verdict: a standing rule or a grant (and who made it), a
        user, an operator override from the shell (with the name the operator gave), or
        the system (an expiry, a resume without one)."""
        automatic = self.automatic
        if automatic is not None:
            maker = automatic.created_by
            return _("%(decider)s, made by %(maker)s") % {
                "decider": automatic,
                "maker": maker.get_username() if maker else _("a deleted user"),
            }
        if self.operator:
            return _("%(name)s (operator override)") % {"name": self.operator}
        if self.decided_by is not None:
            name = str(self.decided_by.get_username())
            lender = self.decided_on_behalf_of
            if lender is None:
                return name
            return _("%(delegate)s on behalf of %(delegator)s") % {
                "delegate": name,
                "delegator": lender.get_username(),
            }
        return str(_("the system"))
