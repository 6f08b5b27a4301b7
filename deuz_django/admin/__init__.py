"""The Django admin for durable runs: a read-only run browser, the approval queue, the
dashboard, the notification delivery log, standing rules, grants and delegations.

Importing this package (``admin.autodiscover``) registers the seven admins.
"""

from .approvals import ApprovalAdmin
from .dashboard import DashboardAdmin
from .delegations import DelegationAdmin
from .deliveries import DeliveryAdmin
from .runs import RunAdmin
from .standing import GrantAdmin, StandingRuleAdmin

__all__ = [
    "ApprovalAdmin",
    "DashboardAdmin",
    "DelegationAdmin",
    "DeliveryAdmin",
    "GrantAdmin",
    "RunAdmin",
    "StandingRuleAdmin",
]
