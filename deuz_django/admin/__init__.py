"""The Django admin for durable runs: a read-only run browser, the approval queue, the
dashboard, the notification delivery log, standing rules and grants, the audit trail.

Importing this package (``admin.autodiscover``) registers the seven admins.
"""

from .approvals import ApprovalAdmin
from .audit import AuditRecordAdmin
from .dashboard import DashboardAdmin
from .deliveries import DeliveryAdmin
from .runs import RunAdmin
from .standing import GrantAdmin, StandingRuleAdmin

__all__ = [
    "ApprovalAdmin",
    "AuditRecordAdmin",
    "DashboardAdmin",
    "DeliveryAdmin",
    "GrantAdmin",
    "RunAdmin",
    "StandingRuleAdmin",
]
