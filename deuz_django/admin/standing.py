"""Standing rules and grants in the admin: rules are made and edited here (the condition
in its compact text form, or as JSON, checked before anything is saved); grants are made
by approving, and listed and revoked here. Each shows what it decided; the approval
queue filters by who decided (:class:`DeciderFilter`).
"""

from __future__ import annotations

import json
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from ..models import ApprovalStatus, Delegation, Grant, StandingRule
from ..models.rules import GrantQuerySet
from ..rules import changes
from ..rules.conditions import ConditionError, parse_condition, parse_text, to_text
from . import display
from .base import ReadOnlyAdmin

CONDITION_HELP = gettext_lazy(
    "Clauses on the call's input, all of which must hold: "
    'amount <= 20 and currency == "USD". Operators: == != < <= > >= in, not in '
    '(with a list: country in ["NO", "SE"]); values are JSON (texts in double '
    "quotes); a dotted path reaches inside: customer.country. Empty: every call of "
    'the tool. A JSON list of {"field", "op", "value"} clauses works too.'
)


class ConditionField(forms.CharField):
    """The compact text form (or the stored JSON list) parsed into the condition data."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            try:
                return to_text(parse_condition(value))
            except ConditionError:
                return json.dumps(value)
        return value

    # A CharField whose cleaned value is the parsed condition, not the text.
    def to_python(self, value: Any) -> list[dict[str, Any]]:  # type: ignore[override]
        text = str(super().to_python(value) or "").strip()
        try:
            if text.startswith("["):
                data = json.loads(text)
                parse_condition(data)
                return list(data)
            return parse_text(text)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(_("Not valid JSON: %s") % error) from None
        except ConditionError as error:
            raise forms.ValidationError(str(error)) from None


class StandingRuleForm(forms.ModelForm):
    condition = ConditionField(
        label=gettext_lazy("Condition"),
        required=False,
        help_text=CONDITION_HELP,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 70}),
    )

    class Meta:
        model = StandingRule
        fields = (
            "tool_name",
            "agent",
            "condition",
            "action",
            "reason",
            "expires_at",
            "active",
        )


class RuleStateFilter(admin.SimpleListFilter):
    title = gettext_lazy("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [
            ("in_force", _("In force")),
            ("expired", _("Expired")),
            ("off", _("Switched off")),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        now = timezone.now()
        if self.value() == "in_force":
            return queryset.filter(active=True).filter(
                Q(expires_at=None) | Q(expires_at__gt=now)
            )
        if self.value() == "expired":
            return queryset.filter(expires_at__lte=now)
        if self.value() == "off":
            return queryset.filter(active=False)
        return queryset


def state_badge(obj: StandingRule | Grant, off: bool) -> str:
    """In force, expired (when) or switched off / revoked."""
    if off:
        label = _("revoked") if isinstance(obj, Grant) else _("switched off")
        return display.badge("expired", label)
    if obj.expired:
        return display.badge("expired", _("expired"))
    until = (
        format_html("<br>{} {}", _("until"), display.relative_time(obj.expires_at))
        if obj.expires_at
        else ""
    )
    return format_html("{}{}", display.badge("approved", _("in force")), until)


def decisions_link(obj: StandingRule | Grant | Delegation, field: str) -> str:
    """How many calls ``obj`` decided, linking the queue filtered to them."""
    count: int = getattr(obj, "decision_count", 0)
    if not count:
        return "0"
    queue = reverse("admin:deuz_django_approval_changelist")
    return format_html(
        '<a href="{}?status=all&amp;{}={}">{}</a>', queue, field, obj.pk, count
    )


class DeciderFilter(admin.SimpleListFilter):
    """By who decided: a person, or automatically (a standing rule or a grant)."""

    title = gettext_lazy("decided by")
    parameter_name = "decider"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [
            ("automatic", _("A standing rule or grant")),
            ("person", _("A person")),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        automatic = Q(decided_by_rule__isnull=False) | Q(decided_by_grant__isnull=False)
        if self.value() == "automatic":
            return queryset.filter(automatic)
        if self.value() == "person":
            return queryset.exclude(status=ApprovalStatus.PENDING).exclude(automatic)
        return queryset


@admin.register(StandingRule)
class StandingRuleAdmin(admin.ModelAdmin):
    form = StandingRuleForm
    list_display = (
        "rule",
        "agent_label",
        "action_badge",
        "reason",
        "made_by",
        "state",
        "decided",
    )
    list_filter = (RuleStateFilter, "action", "tool_name")
    search_fields = ("tool_name", "agent", "reason")
    actions = ("switch_off",)
    readonly_fields = ("made_by", "created_at", "updated_at")

    class Media:
        css = {"all": ("deuz_django/admin/deuz-admin.css",)}

    def get_queryset(self, request: HttpRequest) -> QuerySet[StandingRule]:
        rules: QuerySet[StandingRule] = super().get_queryset(request)
        return rules.select_related("created_by").annotate(
            decision_count=Count("decisions")
        )

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(StandingRuleForm.Meta.fields)
        return fields if obj is None else [*fields, *self.readonly_fields]

    def save_model(
        self, request: HttpRequest, obj: Any, form: Any, change: Any
    ) -> None:
        """Whoever saves the rule makes it: it decides with their rights from now on."""
        changes.save_rule(obj, request.user, created=not change)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        changes.delete_rules(StandingRule.objects.filter(pk=obj.pk), request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        changes.delete_rules(queryset, request.user)

    @admin.display(description=gettext_lazy("rule"), ordering="tool_name")
    def rule(self, obj: StandingRule) -> str:
        when = obj.condition_text or _("every call")
        return format_html(
            '<strong>{}</strong> <span class="deuz-muted">#{}</span><br><code>{}</code>',
            obj.tool_name,
            obj.pk,
            when,
        )

    @admin.display(description=gettext_lazy("agent"), ordering="agent")
    def agent_label(self, obj: StandingRule) -> str:
        return obj.agent or _("any")

    @admin.display(description=gettext_lazy("action"), ordering="action")
    def action_badge(self, obj: StandingRule) -> str:
        value = "approved" if obj.action == "approve" else "denied"
        return display.badge(value, obj.get_action_display())

    @admin.display(description=gettext_lazy("made by"))
    def made_by(self, obj: StandingRule) -> str:
        return obj.created_by.get_username() if obj.created_by else display.EMPTY

    @admin.display(description=gettext_lazy("state"))
    def state(self, obj: StandingRule) -> str:
        return state_badge(obj, not obj.active)

    @admin.display(description=gettext_lazy("decided"), ordering="decision_count")
    def decided(self, obj: StandingRule) -> str:
        return decisions_link(obj, "decided_by_rule")

    @admin.action(
        permissions=["change"], description=gettext_lazy("Switch selected rules off")
    )
    def switch_off(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        count = changes.switch_off_rules(queryset, request.user)
        messages.success(
            request,
            ngettext(
                "Switched %(count)d rule off.", "Switched %(count)d rules off.", count
            )
            % {"count": count},
        )


class GrantStateFilter(admin.SimpleListFilter):
    title = gettext_lazy("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [
            ("in_force", _("In force")),
            ("expired", _("Expired")),
            ("revoked", _("Revoked")),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "in_force":
            return cast(GrantQuerySet, queryset).in_force()  # the grant admin's rows
        if self.value() == "expired":
            return queryset.filter(expires_at__lte=timezone.now())
        if self.value() == "revoked":
            return queryset.exclude(revoked_at=None)
        return queryset


@admin.register(Grant)
class GrantAdmin(ReadOnlyAdmin):
    list_display = ("grant", "scope_label", "made_by", "state", "decided")
    list_filter = (GrantStateFilter, "scope", "tool_name", "agent")
    search_fields = ("tool_name", "run__run_id", "owner__username")
    actions = ("revoke",)
    fields = ("grant", "scope_label", "made_by", "source", "state", "decided")
    readonly_fields = fields
    changelist_title = gettext_lazy("Grants")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Grant]:
        grants: QuerySet[Grant] = super().get_queryset(request)
        return grants.select_related(
            "created_by", "run", "owner", "approval__run"
        ).annotate(decision_count=Count("decisions"))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Revoking (an action on the list) is the one change; a grant's own page
        stays read-only."""
        return obj is None and admin.ModelAdmin.has_change_permission(self, request)

    @admin.display(description=gettext_lazy("grant"), ordering="tool_name")
    def grant(self, obj: Grant) -> str:
        path = " › ".join(obj.agent_path or [])
        return format_html(
            '<strong>{}</strong> <span class="deuz-muted">#{} · {}{}</span>',
            obj.tool_name,
            obj.pk,
            obj.agent,
            f" › {path}" if path else "",
        )

    @admin.display(description=gettext_lazy("allows"), ordering="scope")
    def scope_label(self, obj: Grant) -> str:
        if obj.run is not None:
            return format_html(
                '{} <a href="{}"><code>{}</code></a>',
                _("calls on run"),
                reverse("admin:deuz_django_run_change", args=[obj.run.pk]),
                obj.run.run_id,
            )
        owner = obj.owner.get_username() if obj.owner else display.EMPTY
        return _("calls in %(owner)s's %(agent)s runs") % {
            "owner": owner,
            "agent": obj.agent,
        }

    @admin.display(description=gettext_lazy("made by"))
    def made_by(self, obj: Grant) -> str:
        who = obj.created_by.get_username() if obj.created_by else display.EMPTY
        return format_html("{}<br>{}", who, display.relative_time(obj.created_at))

    @admin.display(description=gettext_lazy("made with"))
    def source(self, obj: Grant) -> str:
        approval = obj.approval
        if approval is None:
            return display.EMPTY
        return format_html(
            '<a href="{}">{} <code>{}</code></a>',
            reverse("admin:deuz_django_approval_change", args=[approval.pk]),
            approval.tool_name,
            approval.approval_id,
        )

    @admin.display(description=gettext_lazy("state"))
    def state(self, obj: Grant) -> str:
        return state_badge(obj, obj.revoked)

    @admin.display(description=gettext_lazy("decided"), ordering="decision_count")
    def decided(self, obj: Grant) -> str:
        return decisions_link(obj, "decided_by_grant")

    @admin.action(
        permissions=["change"], description=gettext_lazy("Revoke selected grants")
    )
    def revoke(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        count = changes.revoke_grants(queryset, request.user)
        messages.success(
            request,
            ngettext(
                "Revoked %(count)d grant: it approves nothing more.",
                "Revoked %(count)d grants: they approve nothing more.",
                count,
            )
            % {"count": count},
        )
