"""The Django admin for durable runs: a read-only run browser and the approval queue.

Importing this package (``admin.autodiscover``) registers both model admins.
"""

from .approvals import ApprovalAdmin
from .runs import RunAdmin

__all__ = ["ApprovalAdmin", "RunAdmin"]
