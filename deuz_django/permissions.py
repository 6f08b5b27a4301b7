"""Who may see a run, decide one of its approvals, and resume it — the one place that says so.

The admin, the REST API, the WebSocket consumer and the management command all ask here.

==========================  ===============================================================
start a run                 any signed-in, active user (the run is theirs)
see a run                   its owner; staff holding ``deuz_django.view_run``
decide an approval          its run's owner, or a user holding ``deuz_django.decide_approval``
                            (who must also see the run) — and, when the tool names an
                            ``approval_permission``, only holders of that permission
                            (the owner may always *deny* a call on their own run);
                            a tool with ``approval_by_owner=False`` is never approved by
                            the run's owner (separation of duties); a call whose tool the
                            agent no longer has may only be denied
edit a call's input         who may approve it, holding ``deuz_django.edit_approval_input``
                            (the tool must be ``editable``; the rules above depend on the
                            tool only, which an edit never changes)
resume a run                its owner; a user holding ``deuz_django.resume_run``
fork a run                  its owner; a user holding ``deuz_django.fork_run`` (who must
                            also see the run); the fork is the forking user's run
replay a run                its owner; a user holding ``deuz_django.replay_run`` (who must
                            also see the run); the replay is a run of the one who asked
send a run input            who may resume it (:mod:`deuz_django.runs.steering`)
decide on someone's behalf  a delegate, while a delegation is in force
                            (:class:`~deuz_django.models.Delegation`), decides what its
                            delegator may decide with their own rights — on runs the
                            delegate may see, never a call of their own run that its tool
                            keeps owners from approving; rights lent to the delegator pass
                            no further (no re-delegation)
==========================  ===============================================================

Anonymous users may do none of these. A run a user may not see is reported as not found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .core.exceptions import DeuzError
from .models import Delegation, Run
from .models.visibility import VIEW_ANY_RUN, Person, is_signed_in, visible_runs
from .registry import agent_tools, find_tool

if TYPE_CHECKING:
    from .core import Tool
    from .models import Approval

__all__ = [
    "DECIDE_ANY_APPROVAL",
    "EDIT_APPROVAL_INPUT",
    "FORK_ANY_RUN",
    "REPLAY_ANY_RUN",
    "RESUME_ANY_RUN",
    "STOP_ANY_RUN",
    "VIEW_ANY_RUN",
    "approval_tool",
    "can_fork_run",
    "can_replay_run",
    "can_resume_run",
    "can_stop_run",
    "can_view_run",
    "decide_refusal",
    "edit_refusal",
    "is_editable",
    "is_signed_in",
    "lent_rights",
    "may_decide_some",
    "visible_runs",
]

DECIDE_ANY_APPROVAL = "deuz_django.decide_approval"
RESUME_ANY_RUN = "deuz_django.resume_run"
STOP_ANY_RUN = "deuz_django.stop_run"
REPLAY_ANY_RUN = "deuz_django.replay_run"
EDIT_APPROVAL_INPUT = "deuz_django.edit_approval_input"
FORK_ANY_RUN = "deuz_django.fork_run"


def _owns(user: Person | None, run: Run) -> bool:
    return is_signed_in(user) and run.owner_id is not None and run.owner_id == user.pk


def can_view_run(user: Person | None, run: Run) -> bool:
    if not is_signed_in(user):
        return False
    return _owns(user, run) or user.has_perm(VIEW_ANY_RUN)


def can_resume_run(user: Person | None, run: Run) -> bool:
    if user is None or not can_view_run(user, run):
        return False
    return _owns(user, run) or user.has_perm(RESUME_ANY_RUN)


def can_fork_run(user: Person | None, run: Run) -> bool:
    """The owner may fork their own run; others need ``fork_run`` (and to see the
    run). A fork reads the whole history up to its step and may run tools again, so
    forking is asked for like resuming, with a permission of its own."""
    if user is None or not can_view_run(user, run):
        return False
    return _owns(user, run) or user.has_perm(FORK_ANY_RUN)


def can_replay_run(user: Person | None, run: Run) -> bool:
    """As resuming it, with ``replay_run`` for other users' runs: a replay executes
    nothing, but it shows the run's recorded tool outcomes to another model."""
    if user is None or not can_view_run(user, run):
        return False
    return _owns(user, run) or user.has_perm(REPLAY_ANY_RUN)


def can_stop_run(user: Person | None, run: Run) -> bool:
    """The owner may always stop their own run; others need ``stop_run`` (and to see
    the run): a person can always stop what an agent does on their behalf."""
    if user is None or not can_view_run(user, run):
        return False
    return _owns(user, run) or user.has_perm(STOP_ANY_RUN)


def approval_tool(approval: Approval) -> Tool | None:
    """The tool behind an approval, found through the run's agent and the call's path
    (``None`` when the agent no longer has it; an agent that cannot be built right now
    raises its error)."""
    try:
        tools = agent_tools(approval.run.agent)
    except LookupError:
        return None
    return find_tool(tools, approval.tool_name, approval.agent_path or ())


def decide_refusal(
    user: Person | None, approval: Approval, *, approving: bool
) -> str | None:
    """Why ``user`` may not decide ``approval`` (``None`` when they may)."""
    run = approval.run
    if user is None or not can_view_run(user, run):
        return "You may not see this run."
    if not approving and _owns(user, run):
        return None  # the owner may always refuse a call on their own run
    if not _owns(user, run) and not user.has_perm(DECIDE_ANY_APPROVAL):
        return "You may not decide approvals on other users' runs."
    try:
        tool = approval_tool(approval)
    except DeuzError as error:  # e.g. an MCP server that cannot be reached
        return f"The rules for {approval.tool_name} calls cannot be read now: {error}"
    if tool is None:
        # The rules that guard this call are unknown: fail closed for approving.
        if approving:
            return (
                f"The agent has no {approval.tool_name} tool any more; deny the call."
            )
        return None
    if tool.approval_permission and not user.has_perm(tool.approval_permission):
        return (
            f"Deciding {approval.tool_name} calls needs the "
            f"'{tool.approval_permission}' permission."
        )
    if approving and not tool.approval_by_owner and _owns(user, run):
        return f"The run's owner may not approve their own {approval.tool_name} call."
    return None


def lent_rights(
    user: Person | None, approval: Approval, *, approving: bool
) -> Delegation | None:
    """The delegation in force to ``user`` whose delegator may decide ``approval`` with
    their own rights (``None``: none), for a user whose own rights do not let them
    (:func:`decide_refusal`). The earliest such delegation wins, so a decision always
    names the same one."""
    if not is_signed_in(user) or not can_view_run(user, approval.run):
        return None
    if approving and _owner_kept_from_approving(user, approval):
        return None
    lent = Delegation.objects.active().filter(delegate_id=user.pk)
    for delegation in lent.select_related("delegator").order_by("created_at", "pk"):
        if decide_refusal(delegation.delegator, approval, approving=approving) is None:
            return delegation
    return None


def _owner_kept_from_approving(user: Person, approval: Approval) -> bool:
    """The user owns the run and the call's tool keeps owners from approving (or its
    rules cannot be read): separation of duties holds for each person, on anyone's
    behalf."""
    if not _owns(user, approval.run):
        return False
    try:
        tool = approval_tool(approval)
    except DeuzError:
        return True
    return tool is None or not tool.approval_by_owner


def is_editable(approval: Approval) -> bool:
    """Whether the call's tool lets a person edit its input (``editable``)."""
    try:
        tool = approval_tool(approval)
    except DeuzError:
        return False
    return tool is not None and tool.editable


def edit_refusal(user: Person | None, approval: Approval) -> str | None:
    """Why ``user`` may not approve ``approval`` with an edited input (``None``: they
    may): the approving rules of :func:`decide_refusal`, checked again for the edited
    call, and the edit permission."""
    problem = decide_refusal(user, approval, approving=True)
    editor = user
    if problem is not None:
        lent = lent_rights(user, approval, approving=True)
        if lent is None:
            return problem
        editor = lent.delegator  # the edit permission is among the rights lent
    if editor is None:
        return "Sign in to decide approvals."
    if not editor.has_perm(EDIT_APPROVAL_INPUT):
        return f"Editing a call's input needs the '{EDIT_APPROVAL_INPUT}' permission."
    return None


def may_decide_some(user: Person | None) -> bool:
    """Whether ``user`` may decide any approval at all: the admin offers its Approve and
    Deny actions then. Each approval is still checked with :func:`decide_refusal`."""
    if not is_signed_in(user):
        return False
    return (
        user.has_perm(DECIDE_ANY_APPROVAL)
        or Run.objects.filter(owner_id=user.pk).exists()
        or Delegation.objects.active().filter(delegate_id=user.pk).exists()
    )
