"""A run and its history: the rows a checkpoint save writes (the run row's counters,
status and lease; the messages appended since the previous save)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Protocol

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from ..exceptions import RunNotFound
from .visibility import Person, visible_runs

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

    def for_user(self, user: Person | None) -> RunQuerySet:
        """The root runs ``user`` may see (owner, or staff with the view permission)."""
        return visible_runs(self.roots(), user)

    def visible(self, user: Person | None, run_id: str) -> Run:
        """The root run ``run_id`` if ``user`` may see it, else :class:`RunNotFound`:
        another user's run is not found, never forbidden, and sub-agent runs are never
        addressed directly. Every surface looks runs up through here."""
        if not RUN_ID_PATTERN.fullmatch(run_id):  # never sent to the database (NUL, …)
            raise RunNotFound("No such run.")
        run = self.for_user(user).select_related("owner").named(run_id).first()
        if run is None:
            raise RunNotFound(f"No run '{run_id}'.")
        return run

    async def avisible(self, user: Person | None, run_id: str) -> Run:
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
    # A fork (deuz_django.runs.forking): the run and step it was forked from, whether it
    # kept that step's model turn, and the edit it made there (the API's JSON form).
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    forked_at_step = models.PositiveIntegerField(null=True, blank=True)
    forked_with_turn = models.BooleanField(default=False)
    fork_edit = models.JSONField(null=True, blank=True)
    # The digest of the agent's tool definitions when the run last suspended
    # (deuz_django.approvals.tool_versions): a deploy that changed them since shows on the run.
    tools_fingerprint = models.CharField(max_length=64, blank=True)
    # A replay (deuz_django.runs.replays): the run it replays, and what was asked to
    # change — {"agent": name or null, "system": prompt or null, "operator": name if an
    # operator asked}. Not null marks a replay: its legs never execute a tool.
    replay_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="replays",
    )
    replay_options = models.JSONField(null=True, blank=True)
    # The seq of the last input the run accepted (deuz_django.models.inputs): taken by a
    # conditional update of this row, which a completing checkpoint's save also writes,
    # so an input is either refused as too late or seen by that save.
    input_seq = models.PositiveIntegerField(default=0)
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
            ("fork_run", "Can fork other users' runs"),
            ("replay_run", "Can replay other users' runs"),
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


class Dashboard(Run):
    """The admin dashboard's place in the admin index: a proxy, with no table of its own
    and no permissions of its own (``deuz_django.admin.dashboard`` decides who sees it)."""

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = _("dashboard")
        verbose_name_plural = _("dashboard")
