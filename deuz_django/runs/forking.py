"""Forking a run on someone's behalf: who may, the fork, and its first leg.

Every surface forks through :func:`fork_run` (the admin's "Fork from here", ``POST
runs/<id>/fork/``, the WebSocket's ``fork`` frame, ``deuz fork``): the permission of
:func:`~deuz_django.permissions.can_fork_run`, the fork written whole by the store
(:meth:`~deuz_django.storage.store.DjangoSessionStore.fork`) with its audit record in
one transaction, then its first leg
continued in the background like any run (:func:`~.continuing.enqueue_run`). The rules
of what a fork holds are the core's (:mod:`deuz_django.core.durable.forking`).
"""

from __future__ import annotations

import logging
import uuid

from asgiref.sync import sync_to_async

from .. import audit
from ..core.durable import ForkEdit
from ..exceptions import NotPermitted, RunNotFound
from ..models import Run
from ..models.audit import AuditAction
from ..models.visibility import Person
from ..permissions import can_fork_run, is_signed_in
from ..registry import agent_tools
from ..storage.db import bounded_atomic
from ..storage.store import DjangoSessionStore
from .continuing import enqueue_run

logger = logging.getLogger("deuz_django")


def fork_run(
    run_id: str,
    *,
    step: int,
    user: Person | None = None,
    operator: str = "",
    edit: ForkEdit | None = None,
    with_turn: bool = False,
    fork_run_id: str | None = None,
) -> Run:
    """Fork the root run ``run_id`` at step ``step`` for ``user`` and continue the fork
    in the background; the fork's row (its id ``fork_run_id``, else a new uuid4 hex).

    The fork is ``user``'s run. A run the user may not see is :class:`RunNotFound`, one
    they see but may not fork :class:`NotPermitted`. ``operator`` (a name given in a
    shell) forks without the user rules, as ``deuz resume --operator`` decides; the fork
    then stays the parent owner's. A step or edit that does not fit the run is
    :class:`~deuz_django.core.exceptions.InvalidForkError`, a taken id
    :class:`~deuz_django.exceptions.RunExists`: nothing is written then.
    """
    parent = _parent(run_id, user, operator)
    fork_id = fork_run_id or uuid.uuid4().hex
    with bounded_atomic():
        DjangoSessionStore().fork(
            parent.run_id,
            step_index=step,
            run_id=fork_id,
            edit=edit,
            with_turn=with_turn,
            tools=agent_tools(parent.agent),  # an edited input is checked against them
            owner_id=parent.owner_id if operator else getattr(user, "pk", None),
        )
        audit.append(
            AuditAction.FORK,
            user=None if operator else user,
            operator=operator,
            run_id=parent.run_id,
            details={
                "fork": fork_id,
                "step": step,
                "withTurn": with_turn,
                "edit": None if edit is None else edit.to_json(),
            },
        )
    who = f"{operator} (operator)" if operator else _name(user)
    logger.info("deuz: %s forked run %s at step %d into %s", who, run_id, step, fork_id)
    enqueue_run(fork_id)
    return Run.objects.select_related("owner", "forked_from").get(run_id=fork_id)


afork_run = sync_to_async(fork_run)


def _parent(run_id: str, user: Person | None, operator: str) -> Run:
    """The run to fork, if ``user`` may fork it (an operator may fork any root run)."""
    if operator:
        run = Run.objects.roots().named(run_id).first()
        if run is None:
            raise RunNotFound(f"No run '{run_id}'.")
        return run
    if not is_signed_in(user):
        raise NotPermitted("Sign in to fork runs.")
    run = Run.objects.visible(user, run_id)
    if not can_fork_run(user, run):
        raise NotPermitted("You may not fork this run.")
    return run


def _name(user: Person | None) -> str:
    return "nobody" if user is None else str(user.get_username())
