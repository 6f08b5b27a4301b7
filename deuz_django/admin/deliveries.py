"""The delivery log: every mail and webhook request notifications made, how each went,
and "Retry now" for those still pending or failed. Rows are never edited by hand."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.translation import gettext_lazy, ngettext

from ..models import Delivery, DeliveryChannel
from ..notifications import retry_now
from . import display
from .base import ReadOnlyAdmin

RETRY_PERMISSION = "deuz_django.retry_delivery"


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = ("event", "target", "status_badge", "tries", "next_or_done", "error")
    list_filter = ("status", "channel", "event")
    search_fields = ("target", "delivery_id", "run__run_id")
    actions = ("retry_selected",)
    changelist_title = gettext_lazy("Notification deliveries")
    fields = (
        "delivery_id",
        "event",
        "channel",
        "target",
        "run",
        "status_badge",
        "tries",
        "next_or_done",
        "last_status_code",
        "last_error",
        "created",
        "sent",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Delivery]:
        return Delivery.objects.for_user(request.user).select_related("run")

    def has_retry_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(RETRY_PERMISSION))

    @admin.display(description=gettext_lazy("status"), ordering="status")
    def status_badge(self, obj: Delivery) -> str:
        return display.badge(obj.status, obj.get_status_display())

    @admin.display(description=gettext_lazy("attempts"))
    def tries(self, obj: Delivery) -> str:
        return f"{obj.attempts} / {obj.max_attempts}"

    @admin.display(description=gettext_lazy("next attempt / delivered"))
    def next_or_done(self, obj: Delivery) -> str:
        return display.relative_time(obj.delivered_at or obj.next_attempt_at)

    @admin.display(description=gettext_lazy("last error"))
    def error(self, obj: Delivery) -> str:
        if not obj.last_error:
            return display.EMPTY
        return format_html(
            '<span class="deuz-truncate" title="{}">{}</span>',
            obj.last_error,
            obj.last_error,
        )

    @admin.display(description=gettext_lazy("created"))
    def created(self, obj: Delivery) -> str:
        return display.relative_time(obj.created_at)

    @admin.display(description=gettext_lazy("what was sent"))
    def sent(self, obj: Delivery) -> str:
        """The webhook's body; for mail, who was to be mailed, who was, and the mail
        (its text: the HTML part says the same)."""
        body = json.loads(obj.body)
        if obj.channel == DeliveryChannel.EMAIL and "mail" in body:
            body["mail"] = {k: v for k, v in body["mail"].items() if k != "html"}
        return display.json_block(body, str(gettext_lazy("What was sent")))

    @admin.action(
        permissions=["retry"], description=gettext_lazy("Retry selected deliveries now")
    )
    def retry_selected(
        self, request: HttpRequest, queryset: QuerySet[Delivery]
    ) -> None:
        """One more attempt for each pending or failed delivery selected."""
        selected = list(queryset.values_list("pk", flat=True))
        queued = retry_now(selected)
        if queued:
            messages.success(
                request,
                ngettext(
                    "Retrying %(count)d delivery.",
                    "Retrying %(count)d deliveries.",
                    len(queued),
                )
                % {"count": len(queued)},
            )
        skipped = len(selected) - len(queued)
        if skipped:
            messages.info(
                request,
                ngettext(
                    "%(count)d delivery was delivered already; it is not sent again.",
                    "%(count)d deliveries were delivered already; they are not sent "
                    "again.",
                    skipped,
                )
                % {"count": skipped},
            )
