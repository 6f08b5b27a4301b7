"""``manage.py demo_setup``: the demo's users, orders and standing rule (safe to run
again).

``staff`` approves refunds (the group "Finance approvers") and keeps the rule that
approves refunds of at most $20 automatically; ``lead`` is in "Finance leads", whom a
refund nobody decided within an hour escalates to.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth.models import Group, Permission, User
from django.core.management.base import BaseCommand

from deuz_django.models import StandingRule
from example_project.models import Order

CUSTOMER = ("customer", "customer-pass")
STAFF = ("staff", "staff-pass")
LEAD = ("lead", "lead-pass")
ORDERS = [
    (
        "A-1001",
        "customer@example.com",
        "Espresso machine",
        Decimal("249.00"),
        "delivered",
    ),
    ("A-1002", "customer@example.com", "Coffee grinder", Decimal("89.50"), "shipped"),
    ("A-1003", "customer@example.com", "Milk frother", Decimal("39.90"), "processing"),
]
APPROVER_PERMISSIONS = [
    ("deuz_django", "view_run"),
    ("deuz_django", "view_approval"),
    ("deuz_django", "decide_approval"),
    ("deuz_django", "resume_run"),
    ("deuz_django", "stop_run"),
    ("deuz_django", "edit_approval_input"),
    ("deuz_django", "view_standingrule"),
    ("deuz_django", "add_standingrule"),
    ("deuz_django", "change_standingrule"),
    ("deuz_django", "view_grant"),
    ("deuz_django", "change_grant"),
    ("example_project", "approve_refund"),
]
# Staff's standing rule: small refunds need no person (deuz_django.models.rules).
SMALL_REFUNDS = {
    "tool_name": "issue_refund",
    "agent": "assistant",
    "reason": "Refunds of at most $20 are approved automatically.",
}


class Command(BaseCommand):
    help = "Create the demo's customer, its finance staff member and a few orders."

    def handle(self, *args: Any, **options: Any) -> None:
        for number, email, item, total, status in ORDERS:
            Order.objects.update_or_create(
                number=number,
                defaults={
                    "customer_email": email,
                    "item": item,
                    "total": total,
                    "status": status,
                },
            )
        permissions = [
            Permission.objects.get(content_type__app_label=app, codename=codename)
            for app, codename in APPROVER_PERMISSIONS
        ]
        approvers, _ = Group.objects.get_or_create(name="Finance approvers")
        approvers.permissions.set(permissions)
        leads, _ = Group.objects.get_or_create(name="Finance leads")
        leads.permissions.set(permissions)
        self._user(*CUSTOMER, email="customer@example.com")
        staff = self._user(*STAFF, email="staff@example.com", is_staff=True)
        staff.groups.add(approvers)
        lead = self._user(*LEAD, email="lead@example.com", is_staff=True)
        lead.groups.add(leads)
        StandingRule.objects.update_or_create(
            **SMALL_REFUNDS,
            defaults={
                "condition": [{"field": "amount", "op": "<=", "value": 20}],
                "action": "approve",
                "created_by": staff,
                "active": True,
            },
        )
        self.stdout.write(
            "Demo users:\n"
            f"  customer  {CUSTOMER[0]} / {CUSTOMER[1]}   — chats at /\n"
            f"  staff     {STAFF[0]} / {STAFF[1]}      — approves refunds at /admin/\n"
            f"  lead      {LEAD[0]} / {LEAD[1]}        — refunds nobody decided in an "
            "hour escalate to them\n"
            "Standing rule: refunds of at most $20 are approved automatically.\n"
        )

    def _user(self, username: str, password: str, **fields: Any) -> User:
        user, _ = User.objects.update_or_create(username=username, defaults=fields)
        user.set_password(password)
        user.save()
        return user
