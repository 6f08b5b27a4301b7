"""Delegations in the admin: who lent their approval rights to whom and until when,
what was decided under each, and "Revoke now" — effective at once (a verdict being
recorded under the delegation finishes first or is refused)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from ..approvals.delegated import audit_delegation, revoke
from ..models import Delegation
from . import display
from .standing import decisions_link


@admin.register(Delegation)
class DelegationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("__str__", "period", "state", "note", "decided")
    list_filter = ("revoked_at",)
    search_fields = ("delegator__username", "delegate__username", "note")
    raw_id_fields = ("delegator", "delegate")
    fields = ("delegator", "delegate", "starts_at", "ends_at", "note")
    actions = ("revoke_now",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Delegation]:
        rows: QuerySet[Delegation] = super().get_queryset(request)
        return rows.select_related("delegator", "delegate").annotate(
            decision_count=Count("decisions")
        )

    def get_readonly_fields(
        self, request: HttpRequest, obj: Delegation | None = None
    ) -> tuple[str, ...]:
        """A delegation is made, then only revoked: its page never rewrites it."""
        return () if obj is None else ("delegator", "delegate", *self.fields[2:])

    def save_model(
        self, request: HttpRequest, obj: Delegation, form: Any, change: bool
    ) -> None:
        """Made here (never changed: its page is read-only once made), audited."""
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            if not change:
                audit_delegation(obj, "made", user=request.user)

    def has_delete_permission(
        self, request: HttpRequest, obj: Delegation | None = None
    ) -> bool:
        return False  # the decisions made under it keep naming it

    @admin.display(description=gettext_lazy("period"), ordering="starts_at")
    def period(self, obj: Delegation) -> str:
        return format_html(
            "{} – {}",
            display.relative_time(obj.starts_at),
            display.relative_time(obj.ends_at),
        )

    @admin.display(description=gettext_lazy("state"))
    def state(self, obj: Delegation) -> str:
        if obj.revoked_at is not None:
            return display.badge("revoked", _("revoked"))
        if obj.ends_at <= timezone.now():
            return display.badge("expired", _("ended"))
        if obj.starts_at > timezone.now():
            return display.badge("pending", _("not yet"))
        return display.badge("approved", _("in force"))

    @admin.display(description=gettext_lazy("decided"), ordering="decision_count")
    def decided(self, obj: Delegation) -> str:
        return decisions_link(obj, "delegation")

    @admin.action(description=gettext_lazy("Revoke now"), permissions=["change"])
    def revoke_now(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        revoked = sum(revoke(d, by=request.user) for d in queryset)
        self.message_user(
            request,
            ngettext(
                "Revoked %(count)d delegation.",
                "Revoked %(count)d delegations.",
                revoked,
            )
            % {"count": revoked},
            messages.SUCCESS,
        )
