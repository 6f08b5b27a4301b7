"""The Django admin for durable runs: a read-only run browser, the approval queue and the
dashboard.

Importing this package (``admin.autodiscover``) registers the three admins.
"""

from .approvals import ApprovalAdmin
from .dashboard import DashboardAdmin
from .runs import RunAdmin

__all__ = ["ApprovalAdmin", "DashboardAdmin", "RunAdmin"]
