"""The Django admin for durable runs: a read-only run browser, the approval queue, the
dashboard and the notification delivery log.

Importing this package (``admin.autodiscover``) registers the four admins.
"""

from .approvals import ApprovalAdmin
from .dashboard import DashboardAdmin
from .deliveries import DeliveryAdmin
from .runs import RunAdmin

__all__ = ["ApprovalAdmin", "DashboardAdmin", "DeliveryAdmin", "RunAdmin"]
