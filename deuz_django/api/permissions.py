"""DRF permission classes; each one asks :mod:`deuz_django.permissions`, which decides.

Runs a user may not see never reach these: views look them up through
``Run.objects.for_user``, so another user's run is a 404, not a 403.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission

from .. import permissions as rules
from ..models import Run


class IsActiveUser(BasePermission):
    """Signed in with an active account (anonymous requests get 401)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.is_active)


class CanViewRun(BasePermission):
    """The run's owner, or a user holding ``deuz_django.view_run``."""

    def has_object_permission(self, request: Any, view: Any, obj: Run) -> bool:
        return rules.can_view_run(request.user, obj)


class CanResumeRun(BasePermission):
    """The run's owner, or a user holding ``deuz_django.resume_run``."""

    message = "You may not resume this run."

    def has_object_permission(self, request: Any, view: Any, obj: Run) -> bool:
        return rules.can_resume_run(request.user, obj)


class CanForkRun(BasePermission):
    """The run's owner, or a user holding ``deuz_django.fork_run``."""

    message = "You may not fork this run."

    def has_object_permission(self, request: Any, view: Any, obj: Run) -> bool:
        return rules.can_fork_run(request.user, obj)


class CanReplayRun(BasePermission):
    """The run's owner, or a user holding ``deuz_django.replay_run``."""

    message = "You may not replay this run."

    def has_object_permission(self, request: Any, view: Any, obj: Run) -> bool:
        return rules.can_replay_run(request.user, obj)
