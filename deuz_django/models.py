"""The tables behind durable runs: a run, its history, its approvals and its stream journal.

A checkpoint save writes only what changed: the run row (counters, status, lease check) and
the messages appended since the previous save, so its cost does not grow with history.
Messages and journal parts are stored as the checkpoint codec's JSON text (bytes-safe).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from .deadlines import escalation_label
from .exceptions import RunNotFound
from .permissions import visible_runs
from .standing import Grant, StandingRule

# The ids callers may choose and address runs by (they go into URLs and group names).
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,100}")


class RunStatus(models.TextChoices):
    RUNNING = "running", _("running")
    SUSPENDED = "suspended", _("suspended")
    COMPLETED = "completed", _("completed")
    # Stopped by a person, a run-wide limit or a loop (deuz_django.runs.stopping): nothing
    # continues it.
    STOPPED = "stopped", _("stopped")


class LeaseHolder(Protocol):
    """What names a lease on a run row (:class:`deuz_django.storage.leases.Lease`)."""

    @property
    def run_id(self) -> str: ...

    @property
    def owner(self) -> str: ...

    @property
    def generation(self) -> int: ...


class RunQuerySet(models.QuerySet["Run"]):
    def lease_free(self, now: datetime) -> RunQuerySet:
        """The runs no live lease holds at ``now``: none was taken, it was released, or
        it expired."""
        return self.filter(
            Q(lease_owner="") | Q(lease_expires_at__lt=now) | Q(lease_expires_at=None)
        )

    def held_by(self, lease: LeaseHolder) -> RunQuerySet:
        """The run ``lease`` still holds (its owner and fencing generation)."""
        return self.filter(
            run_id=lease.run_id,
            lease_owner=lease.owner,
            lease_generation=lease.generation,
        )

    def for_user(self, user: Any) -> RunQuerySet:
        """The root runs ``user`` may see (owner, or staff with the view permission)."""
        return visible_runs(self.roots(), user)

    def visible(self, user: Any, run_id: str) -> Run:
        """The root run ``run_id`` if ``user`` may see it, else :class:`RunNotFound`:
        another user's run is not found, never forbidden, and sub-agent runs are never
        addressed directly. Every surface looks runs up through here."""
        if not RUN_ID_PATTERN.fullmatch(run_id):  # never sent to the database (NUL, …)
            raise RunNotFound("No such run.")
        run = self.for_user(user).select_related("owner").named(run_id).first()
        if run is None:
            raise RunNotFound(f"No run '{run_id}'.")
        return run

    async def avisible(self, user: Any, run_id: str) -> Run:
        # In a thread: the permission check may query the database (``has_perm``).
        return await sync_to_async(self.visible)(user, run_id)

    def named(self, run_id: str) -> RunQuerySet:
        """The run ``run_id`` (unique), unordered: the model's ``-updated_at`` ordering
        would be compiled and sorted for one row."""
        return self.filter(run_id=run_id).order_by()

    def roots(self) -> RunQuerySet:
        return self.filter(parent__isnull=True)


class Run(models.Model):
    """One durable run (a root run, or a sub-agent child under ``parent``)."""

    run_id = models.CharField(max_length=500, unique=True)
    agent = models.CharField(max_length=100, db_index=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="deuz_runs",
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    title = models.CharField(max_length=200, blank=True)
    status = models.CharField(
        max_length=16,
        choices=RunStatus.choices,
        default=RunStatus.RUNNING,
        db_index=True,
    )
    step_index = models.PositiveIntegerField(default=0)
    usage = models.JSONField(default=dict)
    # The checkpoint's pending approval requests, as codec JSON ("" when there are none).
    pending_approvals = models.TextField(blank=True)
    agent_path = models.JSONField(null=True, blank=True)
    checkpoint_created_at = models.FloatField(default=0)  # ms, the loop's clock
    message_count = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    # The run's trace, as a W3C ``traceparent`` (version 00), stored by its first leg when
    # OpenTelemetry records spans; every later leg joins it (deuz_django.core.tracing).
    trace_context = models.CharField(max_length=55, blank=True)
    # Automatic recovery (deuz_django.runs.recovery): attempts since the last leg that ended
    # cleanly, and when the next may start (set after a failure recovery should retry).
    recovery_attempts = models.PositiveSmallIntegerField(default=0)
    recover_after = models.DateTimeField(null=True, blank=True)
    # A leg opened the stream journal and has not closed it yet (readers wait for "done").
    journal_open = models.BooleanField(default=False)
    # Legs started (deuz_django.runs.limits bounds them over the whole run).
    legs = models.PositiveIntegerField(default=0)
    # A stop asked for (deuz_django.runs.stopping): when, why, by whom (a user, an operator
    # from a shell, or nobody: a run-wide limit or a loop); ``stopped_at`` once it took
    # effect (the run is ``stopped``).
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.TextField(blank=True)
    stopped_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="deuz_stopped_runs",
    )
    stop_operator = models.CharField(max_length=150, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    # The digest of the agent's tool definitions when the run last suspended
    # (deuz_django.approvals.tool_versions): a deploy that changed them since shows on the run.
    tools_fingerprint = models.CharField(max_length=64, blank=True)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_generation = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        permissions = [
            ("decide_approval", "Can decide approvals on other users' runs"),
            ("resume_run", "Can resume other users' runs"),
            ("stop_run", "Can stop other users' runs"),
        ]
        # The dashboard's day-by-day aggregates over root runs (deuz_django.dashboard).
        indexes = [
            models.Index(
                fields=["created_at", "status"],
                condition=Q(parent__isnull=True),
                name="deuz_run_root_created",
            ),
            models.Index(
                fields=["agent", "created_at"],
                condition=Q(parent__isnull=True),
                name="deuz_run_root_agent_created",
            ),
            models.Index(
                fields=["created_at"],
                condition=Q(parent__isnull=True) & ~Q(last_error=""),
                name="deuz_run_root_failed_created",
            ),
            # The recovery sweep's journals left open by a dead process.
            models.Index(
                fields=["updated_at"],
                condition=Q(journal_open=True),
                name="deuz_run_journal_open",
            ),
        ]

    def __str__(self) -> str:
        return self.run_id

    @property
    def total_tokens(self) -> int:
        return int(self.usage.get("totalTokens", 0)) if self.usage else 0

    @property
    def stop_description(self) -> str:
        """What a stopped (or stopping) run tells people: by whom, and why."""
        if not self.stop_reason:
            return str(_("Stopped by %(who)s.") % {"who": self.stopper})
        why = self.stop_reason.rstrip()
        if not why.endswith((".", "!", "?")):
            why += "."
        return str(_("Stopped by %(who)s: %(why)s") % {"who": self.stopper, "why": why})

    @property
    def stopper(self) -> str:
        """Who asked for the stop: a user, an operator from a shell, or the system (a
        run-wide limit, a loop)."""
        if self.stop_operator:
            return _("%(name)s (operator)") % {"name": self.stop_operator}
        if self.stopped_by is not None:
            return str(self.stopped_by.get_username())
        return str(_("the system"))


class RunMessage(models.Model):
    """One message of a run's history, at its position."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="messages")
    index = models.PositiveIntegerField()
    role = models.CharField(max_length=16)
    data = models.TextField()  # codec JSON of the message
    # sha1 of ``data``: finds where a rewritten history diverges from the stored one.
    digest = models.CharField(max_length=40)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "index"], name="deuz_message_position"
            )
        ]

    def __str__(self) -> str:
        return f"{self.run_id}[{self.index}] {self.role}"


class RunStep(models.Model):
    """One step's model turn in the step journal, recorded before any of its tools ran.

    ``basis`` is how many messages the history held when the model was called; ``message``
    the codec JSON of the assistant message with its tool calls.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="journal_steps")
    step_index = models.PositiveIntegerField()
    basis = models.PositiveIntegerField()
    message = models.TextField()

    class Meta:
        ordering = ["run", "step_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "step_index"], name="deuz_journal_step"
            )
        ]

    def __str__(self) -> str:
        return f"{self.run_id} step {self.step_index}"


class RunCall(models.Model):
    """One tool call of a journaled step — an execution: the row exists once the call
    started; it is ``finished`` once its outcome (``result``, codec JSON, and
    ``is_error``) is recorded. A call that ran on a recorded decision points at it
    (``decision``, its receipt): one decision, one execution, by the unique key."""

    step = models.ForeignKey(RunStep, on_delete=models.CASCADE, related_name="calls")
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200, blank=True)
    finished = models.BooleanField(default=False)
    result = models.TextField(blank=True)
    is_error = models.BooleanField(default=False)
    decision = models.OneToOneField(
        "Approval",
        null=True,
        blank=True,
        on_delete=models.RESTRICT,
        related_name="execution",
    )
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["step", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["step", "tool_call_id"], name="deuz_journal_call"
            )
        ]

    def __str__(self) -> str:
        state = "finished" if self.finished else "started"
        return f"{self.tool_call_id} ({state})"


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
    def for_user(self, user: Any) -> ApprovalQuerySet:
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
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
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
            return self.execution  # type: ignore[no-any-return]
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
            return str(self.decided_by.get_username())
        return str(_("the system"))


class Dashboard(Run):
    """The admin dashboard's place in the admin index: a proxy, with no table of its own
    and no permissions of its own (``deuz_django.admin.dashboard`` decides who sees it)."""

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = _("dashboard")
        verbose_name_plural = _("dashboard")


class StreamEntry(models.Model):
    """One UI part of a run's stream, at its gapless per-run ``seq`` (or the leg-end sentinel)."""

    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="stream_entries"
    )
    seq = models.PositiveIntegerField()
    part = models.TextField()  # JSON of the UI part; {"type":"done"} ends a leg

    class Meta:
        ordering = ["run", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="deuz_stream_seq")
        ]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq}"


# The notification delivery log has a module of its own (its rows and their lifecycle).
from .deliveries import Delivery, DeliveryChannel, DeliveryStatus  # noqa: E402, F401
