"""Errors of the Django integration; each entry point (admin, REST, WebSocket, command)
turns them into its own kind of answer.

The hierarchy::

    DeuzError (core)
    ├── RunNotFound          no such run, or one the user may not see (REST: 404)
    ├── RunExists            a run with the caller-chosen id exists already (409; the
    │                        core's RunExistsError)
    ├── RunBusy              another leg holds the run's lease (409)
    │   ├── ProcessStopping  this process is shutting down (SIGTERM); another continues
    │   └── InputRejected    input while a leg runs, to an agent that takes none then
    │                        (``steering="reject"``, 409)
    ├── RunNotResumable      the run is completed, or approvals are still undecided (409)
    ├── ApprovalNotFound     no such approval on that run (400)
    ├── ApprovalAlreadyDecided  a decided approval never changes again (409)
    ├── InvalidVerdict       an approving verdict's token does not verify or pin the call (400)
    │   └── ApprovalExpired  the approval is older than ``APPROVAL_MAX_AGE`` (400; recorded
    │                        as expired by the surfaces that decide one call at a time)
    ├── RunStopped           a stop was asked for (a person, a run-wide limit, a loop):
    │                        the leg ends at its next fence and the run is ``stopped``
    ├── RunNotStoppable      the run is completed or stopped already (409)
    ├── RunNotReplayable     the run is not finished, or a replay's original is gone (409)
    ├── NotAReplay           the run replays nothing: there is nothing to compare (404)
    ├── RunNotSteerable      input for a run that is completed or stopped (409)
    ├── LeaseLost            this leg's lease was taken over; its writes are refused
    ├── CheckpointSaveFailed a save failed: the leg stopped, recovery continues the run
    └── UnknownAgent         no agent registered under that name (also a config error)
    NotPermitted (PermissionDenied)  the user may not do this (403)
    InvalidDeadline (ImproperlyConfigured)  an agent's deadlines are misconfigured
"""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import ImproperlyConfigured, PermissionDenied

from .core.exceptions import DeuzError, RunExistsError


class RunNotFound(DeuzError, LookupError):
    code = "run_not_found"


class RunExists(RunExistsError, ValueError):
    """The core's :class:`~deuz_django.core.exceptions.RunExistsError`, as the 0.1
    name (a ``ValueError`` too)."""


class RunBusy(DeuzError):
    code = "run_busy"

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"Run '{run_id}' is busy: another leg is running it. Try again when it ends."
        )
        self.run_id = run_id


class RunQueued(RunBusy):
    """The run's lease is a claim waiting in a task queue: no leg runs it yet. Busy all
    the same (one claim at a time), but said as it is: until a worker starts the leg, or
    the claim lapses and recovery continues the run."""

    def __init__(self, run_id: str, lapses_at: datetime) -> None:
        DeuzError.__init__(
            self,
            f"Run '{run_id}' is queued for a worker that has not started it yet; if "
            f"none does, its claim lapses at {lapses_at:%H:%M:%S} UTC and the run can "
            "be continued then (the recovery sweep does).",
        )
        self.run_id = run_id
        self.lapses_at = lapses_at


class ProcessStopping(RunBusy):
    """Why a leg stopped at a boundary, and why no new leg starts, while this process
    shuts down: the run is left (lease released) for another process to continue."""

    code = "process_stopping"

    def __init__(self, run_id: str) -> None:
        DeuzError.__init__(
            self,
            f"This process is shutting down; run '{run_id}' continues in another one.",
        )
        self.run_id = run_id


class InputRejected(RunBusy):
    """Input sent while a leg runs the run, to an agent whose ``steering`` is
    ``"reject"``: it takes input only while the run waits."""

    code = "input_rejected"

    def __init__(self, run_id: str) -> None:
        DeuzError.__init__(
            self,
            f"Run '{run_id}' is busy answering, and its agent takes no input while it "
            "runs; send it once the run waits for you.",
        )
        self.run_id = run_id


class RunNotResumable(DeuzError):
    code = "run_not_resumable"


class ApprovalNotFound(DeuzError, LookupError):
    code = "approval_not_found"


class ApprovalAlreadyDecided(DeuzError):
    code = "approval_already_decided"


class InvalidVerdict(DeuzError, ValueError):
    code = "invalid_verdict"


class ApprovalExpired(InvalidVerdict):
    code = "approval_expired"


class RunStopped(DeuzError):
    """A stop was asked for, or a run-wide limit was reached (``limit`` says which):
    the leg that sees it at its fence ends there."""

    code = "run_stopped"

    def __init__(self, message: str, *, limit: str = "") -> None:
        super().__init__(message)
        self.limit = limit


class RunNotStoppable(DeuzError):
    code = "run_not_stoppable"


class RunNotReplayable(DeuzError):
    """Only a completed or stopped run is replayed; a replay whose original was deleted
    cannot go on (it never executes a tool, and its recorded outcomes are gone)."""

    code = "run_not_replayable"


class NotAReplay(DeuzError, LookupError):
    """The run is no replay (or its original was deleted): there is nothing to compare."""

    code = "not_a_replay"


class RunNotSteerable(DeuzError):
    """Input for a run that is completed or stopped: nothing will read it."""

    code = "run_not_steerable"


class LeaseLost(DeuzError):
    code = "lease_lost"


class CheckpointSaveFailed(DeuzError):
    """A checkpoint save failed: the leg stops there, so no tool runs with nothing durable
    recorded, and recovery continues the run from its last saved boundary."""

    code = "checkpoint_save_failed"


class UnknownAgent(DeuzError, LookupError):
    code = "unknown_agent"


class NotPermitted(PermissionDenied):
    code = "not_permitted"


class InvalidDeadline(ImproperlyConfigured, ValueError):
    """A :class:`~deuz_django.deadlines.Deadline`, or an agent's ``deadlines``, that
    cannot work; the message names the field (``Deadline.extend_by: …``)."""


class InvalidApprovalChain(ImproperlyConfigured, ValueError):
    """An :class:`~deuz_django.quorum.ApprovalChain` (or a stage of one), or an agent's
    ``approval_chains``, that cannot work; the message names the field."""
