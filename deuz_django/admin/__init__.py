"""The Django admin for durable runs: a read-only run browser, the approval queue, the
dashboard, the notification delivery log, standing rules, grants, delegations and the
audit trail.

Importing this package (``admin.autodiscover``) registers the eight admins.
"""

from .approvals import ApprovalAdmin
from .audit import AuditRecordAdmin
from .dashboard import DashboardAdmin
from .delegations import DelegationAdmin
from .deliveries import DeliveryAdmin
from .runs import RunAdmin
from .standing import GrantAdmin, StandingRuleAdmin

__all__ = [
    "ApprovalAdmin",
    "AuditRecordAdmin",
    "DashboardAdmin",
    "DelegationAdmin",
    "DeliveryAdmin",
    "GrantAdmin",
    "RunAdmin",
    "StandingRuleAdmin",
]
