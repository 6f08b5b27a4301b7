"""Legs on the task queues users already run: a real ``rqworker`` (django-tasks-rq on
Redis) and a real Celery worker (django-tasks-celery on RabbitMQ) run a run's legs, its
resume after a verdict, and the recovery sweep (the worker's sweeper thread, or
``recover_runs_task`` queued as a scheduler would); a worker SIGKILLed mid-leg and a task
the queue lost are healed by the lease and the sweep, with no recorded tool call run again;
a worker told to stop hands its run over at the next boundary
(issue #14, item 1; the django-tasks-db twins are test_automatic_recovery.py and
test_graceful_shutdown.py).

Each worker is started in a session of its own and killed with its process group and
every descendant (RQ's work horses leave the group), so none outlives a test. Each test
process has a Celery queue of its own, deleted at the end; the RQ tests use (and empty)
the queue ``default`` of ``DEUZ_TEST_REDIS_URL``: give concurrent test runs their own
Redis database.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from deuz_django import services
from deuz_django.approvals.verdicts import Verdict, record_verdict
from deuz_django.models import Approval, Run
from deuz_django.runs.continuing import enqueue_run
from deuz_django.runs.recovery import recover_runs_task
from tests.django.agents import slow_agent_steps
from tests.django.processes import MANAGE, manage_env, wait_until
from tests.django.run_support import PROMPT
from tests.live_site import CELERY_WORKER, descendants, kill_tree

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.workers]

REDIS_URL = os.environ.get("DEUZ_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
AMQP_URL = os.environ.get("DEUZ_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
CELERY_QUEUE = f"deuz-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
ROOT = MANAGE.parent


@dataclass
class Queue:
    """One backend under test: its settings here, its workers' command and environment."""

    name: str
    settings: dict[str, Any]
    command: list[str]
    env: dict[str, str]
    logs: Path
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start_worker(self, **env: str) -> subprocess.Popen[bytes]:
        log = self.logs / f"{self.name}-worker-{len(self.workers)}.log"
        with log.open("wb") as output:
            worker = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=manage_env(**self.env, **env),
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its pool children die with it (os.killpg)
            )
        self.workers.append(worker)
        return worker

    def kill(self, worker: subprocess.Popen[bytes]) -> None:
        """SIGKILL the worker, its pool and its work horses (RQ's leave its session)."""
        kill_tree(worker)

    def terminate(self, worker: subprocess.Popen[bytes]) -> int:
        """SIGTERM every process of the worker, as systemd and Kubernetes stop one (the
        whole cgroup); its exit status."""
        for pid in [worker.pid, *descendants(worker.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        return worker.wait(timeout=30)

    def purge(self) -> int:
        """Drop every task queued and not yet delivered (a broker that lost them); how
        many there were."""
        if self.name == "rq":
            import django_rq

            return int(django_rq.get_queue("default").empty())
        else:
            from kombu import Connection, Exchange
            from kombu import Queue as AMQPQueue

            # Declared as Celery declares its default queue, so a purge always finds it.
            declared = AMQPQueue(
                CELERY_QUEUE, Exchange(CELERY_QUEUE, "direct"), CELERY_QUEUE
            )
            with Connection(AMQP_URL) as connection:
                declared.bind(connection.default_channel).declare()
                return int(connection.default_channel.queue_purge(CELERY_QUEUE) or 0)

    def log_tail(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(self.logs.glob(f"{self.name}-worker-*.log"))
        )


def rq_queue(logs: Path) -> Queue:
    return Queue(
        name="rq",
        settings={
            "TASKS": {"default": settings.TASK_BACKENDS["rq"]},
            "RQ_QUEUES": {"default": {"URL": REDIS_URL}},
        },
        command=[sys.executable, str(MANAGE), "rqworker", "default"],
        env={"DEUZ_TASKS": "rq", "REDIS_URL": REDIS_URL},
        logs=logs,
    )


def celery_queue(logs: Path) -> Queue:
    return Queue(
        name="celery",
        settings={
            "TASKS": {"default": settings.TASK_BACKENDS["celery"]},
            "CELERY_BROKER_URL": AMQP_URL,
            "CELERY_TASK_DEFAULT_QUEUE": CELERY_QUEUE,
        },
        command=[
            *CELERY_WORKER,
            "--concurrency=1",
            "--without-mingle",
            "--without-gossip",
            "--loglevel=info",
        ],
        env={
            "DEUZ_TASKS": "celery",
            "CELERY_BROKER_URL": AMQP_URL,
            "CELERY_TASK_DEFAULT_QUEUE": CELERY_QUEUE,
        },
        logs=logs,
    )


@pytest.fixture(params=["rq", "celery"])
def queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Queue]:
    """The backend, configured here as in its workers (``DEUZ_TASKS``); its queue is
    empty before the test, and its workers are killed after it."""
    queue = (rq_queue if request.param == "rq" else celery_queue)(tmp_path)
    with ExitStack() as stack:
        stack.enter_context(override_settings(**queue.settings))
        queue.purge()
        try:
            yield queue
        except BaseException:
            print(queue.log_tail())
            raise
        finally:
            for worker in queue.workers:
                queue.kill(worker)
            queue.purge()


@pytest.fixture(scope="module", autouse=True)
def _delete_the_celery_queue() -> Iterator[None]:
    yield
    from kombu import Connection

    with Connection(AMQP_URL) as connection:
        connection.default_channel.queue_delete(CELERY_QUEUE)


def short_leases(seconds: float = 1.0) -> Any:
    return override_settings(DEUZ={**settings.DEUZ, "LEASE_SECONDS": seconds})


def completed(run: Run) -> Callable[[], bool]:
    """Whether the run completed and its last leg let go of the lease and journal."""
    return lambda: Run.objects.filter(
        run_id=run.run_id, status="completed", lease_owner="", journal_open=False
    ).exists()


def test_a_queued_leg_and_its_resume_after_the_verdicts_run_on_the_worker(
    queue: Queue, effects: Callable[[], list[str]]
) -> None:
    run = services.start_run(agent="gated", messages=PROMPT)
    queue.start_worker()
    enqueue_run(run.run_id)
    wait_until(
        lambda: (
            Approval.objects.filter(run=run, status="pending").count() == 2
            and Run.objects.filter(run_id=run.run_id, lease_owner="").exists()
        ),
        "the worker to run the first leg up to its two gated calls and let go",
    )
    assert effects() == []
    decisions = [
        record_verdict(pending, None, Verdict(approved=True), operator="t")
        for pending in Approval.objects.filter(run=run, status="pending")
    ]
    assert decisions[-1].run_ready
    enqueue_run(run.run_id)  # as the REST API does after verdicts
    wait_until(completed(run), "the worker to run the resumed leg")
    assert sorted(effects()) == ["refund:A-1", "send_email:ann@example.com"]


def test_a_worker_killed_mid_leg_leaves_the_run_to_the_next_workers_sweep(
    queue: Queue, effects: Callable[[], list[str]]
) -> None:
    run = services.start_run(agent="slow", messages=PROMPT)
    first = queue.start_worker(
        DEUZ_LEASE_SECONDS="1", DEUZ_TEST_SLOW_STEP="2", DEUZ_TEST_SLOW_SECONDS="60"
    )
    enqueue_run(run.run_id)
    wait_until(lambda: "slow:2:start" in effects(), "the leg to enter step 2's tool")
    queue.kill(first)

    queue.start_worker(
        DEUZ_LEASE_SECONDS="1", DEUZ_RECOVERY_SWEEPER="1", DEUZ_RECOVERY_INTERVAL="0.5"
    )
    # The killed call left no outcome and ``slow`` is not idempotent: the sweep runs the
    # run up to that call and asks a person, never re-running it silently.
    in_doubt = wait_until(
        lambda: Approval.objects.filter(
            run=run, status="pending", kind="outcome_unknown"
        ).first(),
        "the second worker's sweep to recover the run up to the in-doubt call",
    )
    assert in_doubt.tool_call_id == "s2"
    record_verdict(in_doubt, None, Verdict(approved=True), operator="t")
    wait_until(completed(run), "the sweep to continue the decided run")
    log = effects()
    assert log.count("slow:1:end") == 1  # a recorded call is never run again
    assert log.count("slow:2:start") == 2  # the in-doubt call, run again as asked
    for step in range(2, slow_agent_steps + 1):
        assert log.count(f"slow:{step}:end") == 1


def test_a_worker_told_to_stop_ends_its_leg_at_the_next_boundary(
    queue: Queue, effects: Callable[[], list[str]]
) -> None:
    run = services.start_run(agent="slow", messages=PROMPT)
    worker = queue.start_worker(DEUZ_TEST_SLOW_STEP="2", DEUZ_TEST_SLOW_SECONDS="1.5")
    enqueue_run(run.run_id)
    wait_until(lambda: "slow:2:start" in effects(), "the leg to enter step 2's tool")
    assert queue.terminate(worker) == 0

    log = effects()
    assert log.count("slow:2:end") == 1  # the tool it was in finished...
    assert "slow:3:start" not in log  # ...and the leg stopped at that boundary
    run.refresh_from_db()
    assert (run.status, run.step_index, run.lease_owner) == ("running", 2, "")

    queue.start_worker(
        DEUZ_LEASE_SECONDS="0.5",
        DEUZ_RECOVERY_SWEEPER="1",
        DEUZ_RECOVERY_INTERVAL="0.2",
    )
    wait_until(completed(run), "the next worker to continue the run")
    log = effects()
    for step in range(1, slow_agent_steps + 1):
        assert log.count(f"slow:{step}:end") == 1  # no completed step ran twice


@pytest.mark.parametrize("sweeper", ["the worker's sweeper", "recover_runs_task"])
def test_a_leg_the_queue_lost_is_healed_by_the_sweep(
    queue: Queue, effects: Callable[[], list[str]], sweeper: str
) -> None:
    """Swept by the worker's own sweeper thread, or by the sweep as a task that a
    scheduler (Celery beat, rq-scheduler, cron) queues to the worker."""
    run = services.start_run(agent="scripted", messages=PROMPT)
    with short_leases():
        enqueue_run(run.run_id)
    assert queue.purge() == 1  # the broker lost the task before any worker took it

    if sweeper == "recover_runs_task":
        queue.start_worker(DEUZ_LEASE_SECONDS="1")
        wait_until(
            lambda: run.run_id in services.recoverable_runs(1.0, due=True),
            "the lost leg's claim to lapse",
        )
        recover_runs_task.enqueue()
    else:
        queue.start_worker(
            DEUZ_LEASE_SECONDS="1",
            DEUZ_RECOVERY_SWEEPER="1",
            DEUZ_RECOVERY_INTERVAL="0.5",
        )
    wait_until(completed(run), "the sweep on the worker to recover the lost leg")
    assert effects() == ["echo:hi"]
    run.refresh_from_db()
    assert (run.recovery_attempts, run.lease_owner) == (0, "")
