"""Standing decisions: rules staff keep in the admin, and grants people make while approving.

A :class:`StandingRule` approves or denies the calls of one tool whose input meets its
condition (:mod:`deuz_django.rules.conditions`), with a reason, until it expires or is switched
off. A :class:`Grant` is "approve, and allow this tool": for the rest of the run, or for
the run owner's runs of that agent for some hours. Both decide with the rights of the
person who made them, checked again for every call (:mod:`deuz_django.rules.automatic`), so
neither ever approves what that person could not — separation of duties included.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..core.exceptions import DeuzError
from ..registry import agent_names, agent_tools
from ..rules.conditions import Clause, ConditionError, parse_condition, to_text


class RuleAction(models.TextChoices):
    APPROVE = "approve", _("approve")
    DENY = "deny", _("deny")


class StandingRuleQuerySet(models.QuerySet["StandingRule"]):
    def in_force(self) -> StandingRuleQuerySet:
        """Switched on and not expired."""
        return self.filter(active=True).filter(
            Q(expires_at=None) | Q(expires_at__gt=timezone.now())
        )


class StandingRule(models.Model):
    """Approve or deny a tool's calls whose input meets a condition, automatically."""

    tool_name = models.CharField(_("tool"), max_length=200, db_index=True)
    agent = models.CharField(
        _("agent"),
        max_length=100,
        blank=True,
        help_text=_("Only calls in runs of this agent; empty: any agent's."),
    )
    condition = models.JSONField(
        _("condition"),
        default=list,
        blank=True,
        help_text=_("Clauses on the input that must all hold; none: every call."),
    )
    action = models.CharField(_("action"), max_length=8, choices=RuleAction.choices)
    reason = models.CharField(
        _("reason"),
        max_length=500,
        help_text=_("Recorded as the reason of every decision this rule makes."),
    )
    # Who made the rule what it is: whoever saved it last. The rule decides with that
    # person's rights, so an edit never borrows someone else's.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="deuz_rules",
        verbose_name=_("made by"),
    )
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    active = models.BooleanField(_("active"), default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = StandingRuleQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("standing rule")
        verbose_name_plural = _("standing rules")

    def __str__(self) -> str:
        where = f" of {self.agent}" if self.agent else ""
        when = f"when {self.condition_text}" if self.condition else "every call"
        return f"rule #{self.pk}: {self.action} {self.tool_name}{where}, {when}"

    @property
    def clauses(self) -> tuple[Clause, ...]:
        return parse_condition(self.condition)

    @property
    def condition_text(self) -> str:
        try:
            return to_text(self.clauses)
        except ConditionError:
            return str(self.condition)

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    def clean(self) -> None:
        """The condition is well formed and the tool exists (errors name the field)."""
        errors: dict[str, str] = {}
        try:
            parse_condition(self.condition)
        except ConditionError as error:
            errors["condition"] = str(error)
        problem = tool_problem(self.tool_name, self.agent)
        if problem is not None:
            field, message = problem
            errors[field] = message
        if errors:
            raise ValidationError(errors)


def tool_problem(tool_name: str, agent: str) -> tuple[str, str] | None:
    """Why no call could ever match ``tool_name`` (of ``agent``, or of any registered
    agent) — a misspelt name would make a rule that silently never applies — as the
    field at fault and the message."""
    known_agents = agent_names()
    if agent and agent not in known_agents:
        registered = ", ".join(sorted(known_agents)) or "none"
        return "agent", f"Unknown agent {agent!r} (registered: {registered})."
    names: set[str] = set()
    for name in [agent] if agent else known_agents:
        try:
            names |= _tool_names(agent_tools(name))
        except (LookupError, DeuzError) as error:
            if agent:
                return "agent", f"The tools of {agent!r} cannot be read now: {error}"
    if tool_name in names:
        return None
    known = ", ".join(sorted(names)) or "none"
    if agent:
        return (
            "tool_name",
            f"Agent {agent!r} has no tool {tool_name!r} (its tools: {known}).",
        )
    return (
        "tool_name",
        f"No registered agent has a tool {tool_name!r} (tools: {known}).",
    )


def _tool_names(tools: Any) -> set[str]:
    """Every tool name of an agent, its sub-agents' tools included."""
    names = set(tools)
    for tool in tools.values():
        if tool.sub_tools is not None:
            names |= _tool_names(tool.sub_tools)
    return names


class GrantScope(models.TextChoices):
    RUN = "run", _("this run")
    OWNER = "owner", _("the owner's runs")


class GrantQuerySet(models.QuerySet["Grant"]):
    def in_force(self) -> GrantQuerySet:
        """Not revoked and not expired."""
        return self.filter(revoked_at=None).filter(
            Q(expires_at=None) | Q(expires_at__gt=timezone.now())
        )


class Grant(models.Model):
    """ "Approve, and allow this tool": made with an approving verdict, it approves the
    same tool's later calls (at the same agent path) in one run, or in the run owner's
    runs of the same agent until it expires."""

    tool_name = models.CharField(_("tool"), max_length=200)
    agent = models.CharField(_("agent"), max_length=100)
    agent_path = models.JSONField(default=list, blank=True)
    scope = models.CharField(_("scope"), max_length=8, choices=GrantScope.choices)
    run = models.ForeignKey(
        "deuz_django.Run",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="grants",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="deuz_grants_for",
    )
    # The approval whose verdict made the grant (gone once that run is pruned).
    approval = models.ForeignKey(
        "deuz_django.Approval",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="grants_made",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="deuz_grants",
        verbose_name=_("made by"),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    objects = GrantQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("grant")
        verbose_name_plural = _("grants")
        constraints = [
            models.CheckConstraint(
                condition=Q(scope="run", run__isnull=False)
                | Q(scope="owner", owner__isnull=False, expires_at__isnull=False),
                name="deuz_grant_scope_complete",
            )
        ]
        indexes = [models.Index(fields=["tool_name", "agent"], name="deuz_grant_tool")]

    def __str__(self) -> str:
        if self.scope == GrantScope.RUN:
            where = f"on run {self.run.run_id}" if self.run else "on its run"
        else:
            owner = self.owner.get_username() if self.owner else "?"
            where = f"for {owner}'s {self.agent} runs"
        return f"grant #{self.pk}: {self.tool_name} {where}"

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()
