"""The Django admin for durable runs: a read-only run browser, the approval queue, the
dashboard, standing rules and grants.

Importing this package (``admin.autodiscover``) registers the five admins.
"""

from .approvals import ApprovalAdmin
from .dashboard import DashboardAdmin
from .runs import RunAdmin
from .standing import GrantAdmin, StandingRuleAdmin

__all__ = [
    "ApprovalAdmin",
    "DashboardAdmin",
    "GrantAdmin",
    "RunAdmin",
    "StandingRuleAdmin",
]
