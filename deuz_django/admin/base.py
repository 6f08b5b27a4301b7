"""The base of the run and approval admins: nothing is added, changed or deleted by hand.

Runs change only by running; approvals only through the decide actions, which go through
the run service. Both admins share the app's stylesheet.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.contrib import admin
from django.http import HttpRequest, HttpResponse


class ReadOnlyAdmin(admin.ModelAdmin):
    changelist_title: Any = None  # instead of Django's "Select <model> to view"

    class Media:
        css: ClassVar[dict[str, tuple[str, ...]]] = {
            "all": ("deuz_django/admin/deuz-admin.css",)
        }

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {"title": self.changelist_title} if self.changelist_title else {}
        return super().changelist_view(request, {**context, **(extra_context or {})})
