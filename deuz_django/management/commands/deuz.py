"""``manage.py deuz``: list, show, resume, stop, fork, replay, steer (``input``), recover,
sweep and prune runs; lend approval rights (``delegation``); verify and export the
audit trail (``audit``).

    deuz runs [--status S] [--agent A] [--owner USERNAME] [--limit N] [--json]
    deuz show RUN_ID
    deuz resume RUN_ID [--approve ID ...] [--deny ID ... --reason TEXT] [--deny-remaining]
                       [--as USERNAME | --operator NAME]
    deuz stop RUN_ID (--as USERNAME | --operator NAME) [--reason TEXT]
    deuz fork RUN_ID --step N [--with-turn] [--message TEXT | --tool-call ID --input JSON]
                     [--fork-run-id ID] (--as USERNAME | --operator NAME)
    deuz replay RUN_ID [--agent NAME] [--system TEXT] (--as USERNAME | --operator NAME)
    deuz input RUN_ID TEXT (--as USERNAME | --operator NAME) [--input-id ID]
    deuz delegation add FROM_USERNAME TO_USERNAME --until ISO [--from ISO] [--note TEXT]
    deuz delegation list [--user USERNAME] [--all]
    deuz delegation revoke ID
    deuz recover [--older-than SECONDS] [--dry-run]
    deuz sweep [--every SECONDS]
    deuz prune --completed-before DAYS [--dry-run]
    deuz audit verify [--tenant T | --file FILE] · deuz audit export [--since DATE] …

Verdicts name their decider: ``--as USERNAME`` decides as that user, under the same
permission rules as the admin, the REST API and the chat; ``--operator NAME`` is an
operator override that skips the user permission rules (never the token check) and is
recorded as such, with NAME, in the audit trail.

``runs --json`` prints one JSON object per line (JSON Lines). Output ends quietly when the
reader closes the pipe (``deuz runs | head``).

Exit codes: 0 success, 1 a run is busy / not resumable / not stoppable / not replayable
/ unknown or its leg failed, 2 bad arguments (also under ``call_command``:
``CommandError.returncode``), 3 a verdict the decider may not give or a run they may not
stop, fork or replay (nothing is recorded). ``fork`` and ``replay`` print the new run's id
alone, for scripts.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from argparse import ArgumentParser
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from ... import services
from ...conf import deuz_settings
from ...exceptions import (
    ApprovalAlreadyDecided,
    InvalidVerdict,
    LeaseLost,
    NotPermitted,
    RunBusy,
    RunNotFound,
    RunNotResumable,
    RunNotStoppable,
    UnknownAgent,
)
from ...models import Run, RunStatus
from ...runs import recovery
from ...runs.transcript import sections, transcript_lines
from ...storage.db import bounded_atomic
from .. import forking
from ..arguments import Parser, add_actions
from ..auditing import AuditCommand
from ..deciders import ShellDecider
from ..delegating import DelegationAction
from ..inputs import InputAction
from ..lookups import approval_of, run_named
from ..output import (
    BAD_ARGUMENTS,
    NOT_PERMITTED,
    RUN_ERROR,
    deadline,
    owner,
    run_json,
    short,
    table,
    when,
)
from ..replaying import ReplayAction

NO_DECIDER = (
    "A verdict needs a decider: --as USERNAME (decided with that user's permissions) "
    "or --operator NAME (an operator override, recorded as such)."
)


class Command(InputAction, ReplayAction, DelegationAction, AuditCommand):
    help = "Inspect and drive durable agent runs."

    def create_parser(
        self, prog_name: str, subcommand: str, **kwargs: Any
    ) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.__class__ = Parser  # Django builds a plain CommandParser
        parser.epilog = __doc__
        return parser

    def add_arguments(self, parser: ArgumentParser) -> None:
        add_actions(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        try:
            getattr(self, f"handle_{action}")(**options)
            self.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
        except BrokenPipeError:
            self._drop_output()
        except (
            RunNotFound,
            RunBusy,
            RunNotResumable,
            RunNotStoppable,
            ApprovalAlreadyDecided,
            UnknownAgent,
            LeaseLost,
        ) as error:
            raise CommandError(str(error), returncode=RUN_ERROR) from None
        except InvalidVerdict as error:
            raise CommandError(str(error), returncode=BAD_ARGUMENTS) from None

    def _drop_output(self) -> None:
        """The reader went away (``deuz runs | head``): what is left goes nowhere."""
        out = getattr(self.stdout, "_out", None)
        if out is not None and out is sys.stdout:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, out.fileno())
            os.close(devnull)

    # -- actions ----------------------------------------------------------------------------

    def handle_runs(self, **options: Any) -> None:
        runs = Run.objects.roots().select_related("owner")
        if options["status"]:
            runs = runs.filter(status=options["status"])
        if options["agent"]:
            runs = runs.filter(agent=options["agent"])
        if options["owner"]:
            runs = runs.filter(owner__username=options["owner"])
        runs = runs[: options["limit"]]
        if options["json"]:
            for run in runs:
                self.stdout.write(json.dumps(run_json(run), ensure_ascii=False))
            return
        rows = [
            [
                run.run_id,
                short(run.title) or "-",
                run.agent,
                owner(run),
                run.status + (" (failed)" if run.last_error else ""),
                str(run.step_index),
                str(run.total_tokens),
                str(services.current_pending(run).count()),
                when(run.updated_at),
            ]
            for run in runs
        ]
        header = [
            "RUN",
            "TITLE",
            "AGENT",
            "OWNER",
            "STATUS",
            "STEPS",
            "TOKENS",
            "PENDING",
            "UPDATED",
        ]
        self.stdout.write(table(rows, header) if rows else "No runs.")

    def handle_show(self, *, run_id: str, **options: Any) -> None:
        run = run_named(run_id)
        usage = run.usage or {}
        self.stdout.write(f"Run {run.run_id}  agent={run.agent}  status={run.status}")
        self.stdout.write(f"Title {run.title or '-'}")
        self.stdout.write(
            f"Owner {owner(run)}  steps={run.step_index}  "
            f"usage: {usage.get('inputTokens', 0)} in / "
            f"{usage.get('outputTokens', 0)} out / {run.total_tokens} total"
        )
        self.stdout.write(
            f"Created {when(run.created_at)}  updated {when(run.updated_at)}"
        )
        if run.last_error:
            self.stdout.write(self.style.ERROR(f"Last leg failed: {run.last_error}"))
        if run.stop_requested_at is not None:
            state = "Stopped" if run.status == RunStatus.STOPPED else "Stopping"
            self.stdout.write(
                self.style.WARNING(
                    f"{state} at {when(run.stopped_at or run.stop_requested_at)}: "
                    f"{run.stop_description}"
                )
            )
        self._write_transcript(run)
        approvals = run.approvals.select_related("decided_by")
        if approvals:
            self.stdout.write("\nApprovals:")
            rows = [
                [
                    a.approval_id,
                    a.tool_name,
                    a.agent_path_label or "-",
                    a.status,
                    a.decider if not a.is_pending else "-",
                    when(a.decided_at),
                    a.reason or "-",
                    deadline(a),
                ]
                for a in approvals
            ]
            header = [
                "APPROVAL",
                "TOOL",
                "AGENT PATH",
                "STATUS",
                "DECIDED BY",
                "DECIDED AT",
                "REASON",
                "DEADLINE",
            ]
            self.stdout.write(table(rows, header))

    def _write_transcript(self, run: Run) -> None:
        """The run's transcript, each sub-agent's indented under its heading."""
        for section in sections(run):
            indent = ""
            if section.path:
                indent = "    "
                self.stdout.write(
                    f"\nSub-agent {section.path}  ({section.run.run_id}, "
                    f"{section.run.status})"
                )
            else:
                self.stdout.write("")
            for line in transcript_lines(section.entries):
                self.stdout.write(indent + line.replace("\n", "\n" + indent))

    def handle_resume(
        self,
        *,
        run_id: str,
        approve: list[str],
        deny: list[str],
        reason: str,
        deny_remaining: bool,
        as_user: str | None,
        operator: str | None,
        **options: Any,
    ) -> None:
        overlap = set(approve) & set(deny)
        if overlap:
            raise CommandError(
                f"Both approved and denied: {', '.join(sorted(overlap))}",
                returncode=BAD_ARGUMENTS,
            )
        if reason and not (deny or deny_remaining):
            raise CommandError(
                "--reason goes with --deny or --deny-remaining.",
                returncode=BAD_ARGUMENTS,
            )
        deciding = bool(approve or deny or deny_remaining)
        if deciding and not (as_user or (operator and operator.strip())):
            raise CommandError(NO_DECIDER, returncode=BAD_ARGUMENTS)
        if not deciding and (as_user or operator):
            raise CommandError(
                "--as and --operator go with --approve, --deny or --deny-remaining.",
                returncode=BAD_ARGUMENTS,
            )
        run = run_named(run_id)
        if deciding:
            decider = ShellDecider.named(
                as_user=as_user, operator=operator, recorded="recorded as the decider"
            )
            with bounded_atomic():  # every verdict is recorded, or none
                for approval_id, approved in [(a, True) for a in approve] + [
                    (d, False) for d in deny
                ]:
                    decider.decide(approval_of(run, approval_id), approved, reason)
                if deny_remaining:
                    for approval in services.current_pending(run).select_related("run"):
                        decider.decide(approval, False, reason)
            if decider.votes:  # recorded as votes: those calls need more approvals
                self.stdout.write(f"Run {run_id} waits: {'; '.join(decider.votes)}")
                return
        outcome = async_to_sync(services.aresume_run)(run_id)
        if outcome.error:
            raise CommandError(f"The leg failed: {outcome.error}", returncode=RUN_ERROR)
        self.stdout.write(
            f"Run {run_id}: {outcome.status}"
            + (
                f", {outcome.pending_approvals} approval(s) pending"
                if outcome.pending_approvals
                else ""
            )
        )

    def handle_stop(
        self,
        *,
        run_id: str,
        reason: str,
        as_user: str | None,
        operator: str | None,
        **options: Any,
    ) -> None:
        decider = ShellDecider.named(
            as_user=as_user,
            operator=operator,
            recorded="recorded as who stopped the run",
        )
        try:
            run = services.stop_run(
                run_id, user=decider.user, operator=decider.operator, reason=reason
            )
        except NotPermitted as error:
            raise CommandError(
                f"{as_user} may not stop run '{run_id}': {error}",
                returncode=NOT_PERMITTED,
            ) from None
        if run.status == RunStatus.STOPPED:
            self.stdout.write(f"Run {run_id}: stopped")
        else:
            self.stdout.write(
                f"Run {run_id}: stopping — a leg holds it and stops before its next "
                "model call or tool execution"
            )

    def handle_fork(self, **options: Any) -> None:
        self.stdout.write(forking.fork(**options).run_id)

    def handle_recover(
        self, *, older_than: float, dry_run: bool, **options: Any
    ) -> None:
        candidates = services.recoverable_runs(older_than)
        if not candidates:
            self.stdout.write("Nothing to recover.")
            return
        for run_id in candidates:
            if dry_run:
                self.stdout.write(f"would recover {run_id}")
                continue
            try:
                outcome = async_to_sync(services.aresume_run)(run_id)
            except (RunBusy, RunNotResumable, UnknownAgent) as error:
                self.stdout.write(f"skipped {run_id}: {error}")
                continue
            if outcome.error:
                self.stdout.write(f"failed {run_id}: {outcome.error}")
            else:
                self.stdout.write(f"recovered {run_id}: {outcome.status}")

    def handle_sweep(self, *, every: float | None, **options: Any) -> None:
        """Sweep in this process's main thread until SIGTERM or SIGINT ends the wait
        between two sweeps (a sweep under way is finished first)."""
        interval = every if every is not None else deuz_settings.RECOVERY_INTERVAL
        if interval is None:
            raise CommandError(
                "DEUZ['RECOVERY_INTERVAL'] is None (sweeping is off): pass --every "
                "SECONDS.",
                returncode=BAD_ARGUMENTS,
            )
        sweeper = recovery.Sweeper(float(interval))
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: sweeper.stop())
        self.stdout.write(f"Sweeping every {float(interval):g} s until stopped.")
        self.stdout.flush()
        sweeper.run()
        self.stdout.write("Stopped.")

    def handle_prune(
        self, *, completed_before: float, dry_run: bool, **options: Any
    ) -> None:
        now = timezone.now()
        completed = Run.objects.roots().filter(status=RunStatus.COMPLETED)
        runs = completed.filter(updated_at__lt=now - timedelta(days=completed_before))
        retention = timedelta(days=float(deuz_settings.STREAM_RETENTION_DAYS))
        # The journals go through the configured journal (database or Redis).
        old_journals = list(
            completed.filter(updated_at__lt=now - retention)
            .exclude(pk__in=runs)
            .values_list("run_id", flat=True)
        )
        count = runs.count()
        verb = "would delete" if dry_run else "deleted"
        if not dry_run:
            for run_id in old_journals:
                services.delete_journal(run_id)
            for run_id in runs.values_list("run_id", flat=True):
                services.delete_run(run_id)
        self.stdout.write(
            f"{verb} {count} completed run(s) and the stream journals of "
            f"{len(old_journals)} older run(s)"
        )
