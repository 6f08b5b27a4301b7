"""The soak: hundreds of runs through a real deployment, a worker and a daphne SIGKILLed
in the middle, and every part, effect and run accounted for (issue #14).

The deployment: PostgreSQL (a scratch database), Redis (the channel layer), RabbitMQ
(Celery's broker: a queue of the soak's own), daphnes and Celery workers (prefork pools),
all real processes with a 3 s lease and a recovery sweep every second in each. The load:
``--customers`` simulated customers, each starting a run of the soak's agent
(``benchmarks/soak_agent.py``: a streamed sentence, a ticket, another sentence, a refund
that staff must approve, the streamed answer) over REST, following it over a WebSocket —
a quarter of them dropping the socket once mid-run and reconnecting with their last seq,
half of them on another daphne than the one that started the run — then starting the
next, until ``--runs`` runs were started; and one staff member who polls the pending
approvals over REST and approves each after 0.2–2 s. Each customer's first run is a
warm-up (fresh processes pay for imports and connections): checked, not timed.

Two deployments take the same load one after the other: 2 daphnes + 3 workers, one of
each SIGKILLed at a random moment between 30 % and 60 % of the runs and restarted a second
later; and 1 daphne + 1 worker, nothing killed. At the end the soak holds every client's
parts against the run's journal in the database (lost: a journaled part a client never
received, or received different), counts the tools' executions in their effects log
(duplicated: a call that ran twice) and reads every run's status.

    .venv/bin/python benchmarks/soak.py [--json] [--runs 500] [--customers 16] \
        [--database-url postgres://…/postgres] [--redis-url redis://…/0] \
        [--amqp-url amqp://…//]

Progress goes to stderr. Not part of ``make bench`` (it takes several minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._table import report  # noqa: E402
from benchmarks.soak_checks import (  # noqa: E402
    duplicated_effects,
    interrupted,
    lost_parts,
    parts_of,
    quantile,
    query,
    read_journals,
)
from benchmarks.soak_clients import Api, Customer, RunRecord, Staff  # noqa: E402
from tests.live_site import CELERY_WORKER, Daphne, LiveSite, kill_tree  # noqa: E402

TARGET = (
    "every run completed, 0 parts lost, 0 duplicated tool effects, with one worker and "
    "one daphne SIGKILLed mid-soak and restarted (issue #14)"
)
LEASE_SECONDS = "3"
RECOVERY_INTERVAL = "1"
POOL = 4  # processes in each Celery worker's pool: legs it runs at once
KILL_WINDOW = (0.3, 0.6)  # the share of runs completed when the kills happen
DOWNTIME_SECONDS = 1.0
LOAD_SECONDS = 900.0  # the load phase of one deployment gives up after this


@dataclass(frozen=True, slots=True)
class Deployment:
    label: str
    daphnes: int
    workers: int
    kills: bool


DEPLOYMENTS = (
    Deployment("2 daphnes + 3 workers, SIGKILLs", 2, 3, kills=True),
    Deployment("1 daphne + 1 worker", 1, 1, kills=False),
)


@dataclass
class Services:
    database_url: str
    redis_url: str
    amqp_url: str


@dataclass
class Processes:
    """The deployment's daphnes and workers, killed and restarted as the soak says."""

    site: LiveSite
    logs: Path
    daphnes: list[Daphne] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    # The kill runs in a thread the load does not wait for: stopping waits for it, and
    # a kill that comes after the stop does nothing (no process outlives the soak).
    changing: threading.Lock = field(default_factory=threading.Lock)
    stopped: bool = False

    def start_worker(self, index: int) -> subprocess.Popen[bytes]:
        log = self.logs / f"worker-{index}-{len(self.events)}.log"
        with log.open("wb") as output:
            worker = subprocess.Popen(
                [
                    *CELERY_WORKER,
                    f"--concurrency={POOL}",
                    "--prefetch-multiplier=1",  # a queued leg waits for a free process
                    "--without-mingle",
                    "--without-gossip",
                    "--without-heartbeat",
                    "--loglevel=info",
                    f"--hostname=soak{index}-{uuid.uuid4().hex[:6]}@%h",
                ],
                cwd=ROOT,
                env=self.site.env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its pool dies with it (kill_tree)
            )
        deadline = time.monotonic() + 60
        while b" ready." not in log.read_bytes():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {index} did not start:\n{log.read_text()}")
            time.sleep(0.1)
        return worker

    def start(self, deployment: Deployment) -> None:
        with self.changing:
            for _ in range(deployment.daphnes):
                self.daphnes.append(self.site.daphne())
            for index in range(deployment.workers):
                self.workers.append(self.start_worker(index))

    def kill_and_restart(self, at: str) -> None:
        """SIGKILL a random worker (its whole pool) and a random daphne; restart both
        (the daphne on its port) after ``DOWNTIME_SECONDS``."""
        with self.changing:
            if self.stopped:
                return
            w = random.randrange(len(self.workers))
            d = random.randrange(len(self.daphnes))
            kill_tree(self.workers[w])
            self.daphnes[d].kill()
            self.events.append(f"SIGKILL worker {w} and daphne {d} at {at}")
            time.sleep(DOWNTIME_SECONDS)
            self.daphnes[d] = self.site.daphne(self.daphnes[d].port)
            self.workers[w] = self.start_worker(w)

    def log_tails(self) -> str:
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
            for log in sorted(self.logs.glob("*.log"))
        )

    def stop(self) -> None:
        with self.changing:
            self.stopped = True
            try:
                for worker in self.workers:
                    if worker.poll() is None:
                        kill_tree(worker)
            finally:
                self.site.close()  # the daphnes, and the scratch database


def site_for(tmp: Path, services: Services, queue: str) -> LiveSite:
    os.environ["DATABASE_URL"] = services.database_url  # LiveSite's server
    return LiveSite(
        tmp,
        database_prefix="deuz_soak",
        DJANGO_SETTINGS_MODULE="benchmarks.soak_settings",
        DJANGO_DEBUG="0",  # as in production: no log of every query
        REDIS_URL=services.redis_url,
        DEUZ_TASKS="celery",
        CELERY_BROKER_URL=services.amqp_url,
        CELERY_TASK_DEFAULT_QUEUE=queue,
        DEUZ_LEASE_SECONDS=LEASE_SECONDS,
        DEUZ_RECOVERY_INTERVAL=RECOVERY_INTERVAL,
        DEUZ_RECOVERY_SWEEPER="1",  # the Celery workers sweep too, as the servers do
        DEUZ_RECOVERY_BACKOFF="1",
        DEUZ_API_READ_RATE="",  # one staff member and 24 customers are no flood
        DEUZ_API_WRITE_RATE="",
        SOAK_EFFECTS=str(tmp / "effects.log"),
    )


def tokens(site: LiveSite) -> dict[str, str]:
    """A customer and a staff member (who sees every run and decides approvals), with
    their API tokens; the customer's session cookie for the socket."""
    cookie = site.user("customer")
    site.user(
        "staff", "deuz_django.view_run", "deuz_django.decide_approval", staff=True
    )
    found = site.script(
        """
        from django.contrib.auth.models import User
        from rest_framework.authtoken.models import Token
        print(json.dumps({name: Token.objects.create(
            user=User.objects.get(username=name)).key for name in ("customer", "staff")}))
        """
    )
    return {"cookie": cookie, **found}


@dataclass
class Load:
    """One deployment's load: customers who each start a warm-up run (not timed: a fresh
    process's first legs pay for imports and connections), then share ``runs`` runs."""

    processes: Processes
    deployment: Deployment
    runs: int
    customers: int
    warm_ups: list[RunRecord] = field(default_factory=list)
    records: list[RunRecord] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)  # sampled while timed
    started: float | None = None
    elapsed: float = 0.0

    async def run(self) -> Staff:
        """Until every run ended; the staff member who decided their approvals."""
        site = self.processes.site
        credentials = tokens(site)
        ports = [d.port for d in self.processes.daphnes]
        pool = ThreadPoolExecutor(max_workers=2 * self.customers + 8)
        sent: dict[str, float] = {}
        staff = Staff(
            Api(ports, credentials["staff"], pool), Path(site.env["SOAK_EFFECTS"]), sent
        )
        numbers = iter(range(self.runs))
        tag = uuid.uuid4().hex[:6]
        warm = asyncio.Barrier(self.customers)

        async def customer(index: int) -> None:
            api = Api(ports, credentials["customer"], pool)
            person = Customer(api, ports, credentials["cookie"], sent)
            warm_up = await person.run(f"soak-{tag}-warm-{index}", f"A-{index}")
            self.warm_ups.append(warm_up)
            if await warm.wait() == 0:
                self.started = time.monotonic()
            for n in numbers:
                self.records.append(await person.run(f"soak-{tag}-{n}", f"A-{n}"))
            await person.close()

        extras = [asyncio.create_task(self.watch())]
        if self.deployment.kills:
            extras.append(asyncio.create_task(self.chaos()))
        people = asyncio.gather(*(customer(i) for i in range(self.customers)))
        staffing = asyncio.create_task(staff.work(until=people.done))
        try:
            async with asyncio.timeout(LOAD_SECONDS):
                await people
            self.elapsed = time.monotonic() - (self.started or 0)
            await staffing
        finally:
            for task in [*extras, staffing]:
                task.cancel()
            await asyncio.gather(*extras, staffing, return_exceptions=True)
            pool.shutdown(wait=False, cancel_futures=True)
        return staff

    def clock(self) -> str:
        if self.started is None:
            return "warming up"
        return f"{time.monotonic() - self.started:.0f} s"

    async def watch(self) -> None:
        """Progress on stderr, and the load average, every five seconds."""
        while True:
            await asyncio.sleep(5)
            if self.started is not None:
                self.loads.append(os.getloadavg()[0])
            print(
                f"soak [{self.deployment.label}]: {len(self.records)}/{self.runs} runs "
                f"ended, {self.clock()}, load {os.getloadavg()[0]:.1f}",
                file=sys.stderr,
            )

    async def chaos(self) -> None:
        threshold = random.uniform(*KILL_WINDOW) * self.runs
        while len(self.records) < threshold:  # noqa: ASYNC110 (a count, not an event)
            await asyncio.sleep(0.05)
        at = f"{len(self.records)}/{self.runs} runs, {self.clock()}"
        await asyncio.to_thread(self.processes.kill_and_restart, at)
        print(f"soak: {self.processes.events[-1]}", file=sys.stderr)


async def soak(
    deployment: Deployment, services: Services, runs: int, customers: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One deployment under the load: its correctness row and its speed row."""
    queue = f"deuz_soak_{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory(prefix="deuz-soak-") as tmp:
        site = site_for(Path(tmp), services, queue)
        processes = Processes(site, Path(tmp))
        load = Load(processes, deployment, runs, customers)
        try:
            await asyncio.to_thread(processes.start, deployment)
            staff = await load.run()
            every = load.warm_ups + load.records
            journals = read_journals(site)
            duplicated, calls = duplicated_effects(Path(site.env["SOAK_EFFECTS"]))
            statuses = Counter(
                status
                for (status,) in query(
                    site, "SELECT status FROM deuz_django_run WHERE parent_id IS NULL"
                )
            )
        except BaseException:
            print(processes.log_tails(), file=sys.stderr)
            raise
        finally:
            processes.stop()
            delete_queue(services.amqp_url, queue)
    anomalies = [a for r in every for a in r.anomalies] + staff.stats.anomalies
    for anomaly in anomalies[:20]:
        print(f"soak [{deployment.label}]: {anomaly}", file=sys.stderr)
    print(
        f"soak [{deployment.label}]: {'; '.join(processes.events) or 'no kills'}",
        file=sys.stderr,
    )
    timed = load.records
    first_parts = [r.first_part_s for r in timed if r.first_part_s is not None]
    resumes = list(itertools.chain.from_iterable(r.resume_latencies for r in timed))
    correctness = {
        "deployment": deployment.label,
        "runs": len(every),
        "completed": statuses.get("completed", 0),
        "parts lost": lost_parts(journals, every),
        "duplicated effects": duplicated,
        "tool calls": calls,
        "anomalies": len(anomalies),
        "steps re-run": interrupted(journals),
        "in doubt": staff.stats.in_doubt_happened + staff.stats.in_doubt_run_again,
        "reconnects": sum(r.reconnects for r in every),
        "dropped by kill": sum(r.dropped for r in every),
    }
    speed = {
        "deployment": deployment.label,
        "timed runs": len(timed),
        "seconds": load.elapsed,
        "runs/s": len(timed) / load.elapsed,
        "parts/s": sum(parts_of(journals[r.run_id]) for r in timed) / load.elapsed,
        "verdict->part p50 ms": quantile(resumes, 10),
        "verdict->part p95 ms": quantile(resumes, 19),
        "start->part p50 ms": quantile(first_parts, 10),
        "start->part p95 ms": quantile(first_parts, 19),
        "load avg": statistics.mean(load.loads) if load.loads else None,
    }
    return correctness, speed


def delete_queue(amqp_url: str, queue: str) -> None:
    from kombu import Connection

    with contextlib.suppress(Exception), Connection(amqp_url) as connection:
        connection.default_channel.queue_delete(queue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--customers", type=int, default=16)
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672//")
    args = parser.parse_args()
    services = Services(args.database_url, args.redis_url, args.amqp_url)
    correctness, speed = [], []
    for deployment in DEPLOYMENTS:
        rows = asyncio.run(soak(deployment, services, args.runs, args.customers))
        correctness.append(rows[0])
        speed.append(rows[1])
    settings = (
        f"{args.customers} customers, lease {LEASE_SECONDS} s, sweep every "
        f"{RECOVERY_INTERVAL} s, {POOL} processes per worker"
    )
    report(
        "soak",
        {f"correctness ({settings})": correctness, "speed": speed},
        target=TARGET,
        as_json=args.json,
    )


if __name__ == "__main__":
    main()
