"""A deploy (SIGTERM) mid-answer: the stopping daphne lets the leg reach a boundary within
its grace period, aborts it cooperatively, releases its lease and exits; the other daphne
continues the run at once — not after the lease lapses (the issue's figure, within 2 s
of the exit, is measured in benchmarks/recovery_latency.py) — and the browser, reconnected
through the same address, shows the answer exactly once (issue #12, item 7)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import Browser, expect

from tests.live_site import Daphne, LiveSite, free_port

from .conftest import CUSTOMER, answer, ask, demo, new_context, run_status, sign_in
from .test_chat_resilience import FIRST_WORDS, GREETING, run_state

LEASE_SECONDS = 30
# Far below the lease: only a handover explains it. The time itself (~1 s here) is
# measured by benchmarks/recovery_latency.py, not asserted.
HANDOVER_SECONDS = LEASE_SECONDS / 3


@dataclass(frozen=True)
class Front:
    """The address the browser knows (a load balancer's): ``http`` as on a Daphne."""

    port: int

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class FailoverProxy:
    """Forwards each new connection to the first server that accepts it."""

    def __init__(self, backends: list[Daphne]) -> None:
        self.backends = backends
        self.front = Front(free_port())
        self._loop = asyncio.new_event_loop()
        self._writers: list[asyncio.StreamWriter] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._forward, "127.0.0.1", self.front.port)
        )
        self._ready.set()
        self._loop.run_forever()
        server.close()
        self._loop.run_until_complete(self._shut(server))
        self._loop.close()

    async def _shut(self, server: asyncio.Server) -> None:
        for writer in self._writers:
            writer.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for running in tasks:
            running.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    async def _forward(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        self._writers.append(client_out)
        for backend in self.backends:
            try:
                server_in, server_out = await asyncio.open_connection(
                    "127.0.0.1", backend.port
                )
            except OSError:
                continue
            self._writers.append(server_out)
            await asyncio.gather(
                self._pipe(client_in, server_out),
                self._pipe(server_in, client_out),
            )
            return
        client_out.close()

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        with contextlib.suppress(OSError, RuntimeError):
            sink.close()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@pytest.fixture
def deploy_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    # A slow answer, a short grace period and a long lease: only the handover can
    # explain a quick continuation.
    site = demo(
        tmp_path_factory.mktemp("deploy-site"),
        DEUZ_DEMO_STREAM_DELAY="0.12",
        DEUZ_SHUTDOWN_GRACE="0.3",
        DEUZ_LEASE_SECONDS=str(LEASE_SECONDS),
    )
    with contextlib.closing(site) as live:
        yield live


def test_a_sigtermed_server_hands_its_run_over_and_the_answer_appears_once(
    browser: Browser, deploy_site: LiveSite
) -> None:
    old, new = deploy_site.daphne(), deploy_site.daphne()
    proxy = FailoverProxy([old, new])
    context = new_context(browser, proxy.front)  # type: ignore[arg-type]
    page = context.new_page()
    try:
        sign_in(page, *CUSTOMER)
        run_id = ask(page, "Hi, what can you do?")
        expect(answer(page)).to_contain_text(FIRST_WORDS)
        assert f":{old.process.pid}:" in deploy_site.run_column(run_id, "lease_owner")

        old.process.send_signal(signal.SIGTERM)
        old.process.wait(20)
        exited = time.monotonic()
        assert old.process.returncode in (0, 1, -signal.SIGTERM)  # not killed
        while f":{new.process.pid}:" not in (
            owner := deploy_site.run_column(run_id, "lease_owner")
        ):
            if time.monotonic() - exited > 20:
                raise AssertionError(
                    f"the run was not continued (lease: {owner!r}; old pid "
                    f"{old.process.pid}, new pid {new.process.pid})\n"
                    + old.log.read_text()[-4000:]
                    + "\n----\n"
                    + new.log.read_text()[-4000:]
                )
            if run_state(deploy_site, run_id)["status"] == "completed":
                break
            time.sleep(0.02)
        handover = time.monotonic() - exited
        assert handover < HANDOVER_SECONDS, f"continued {handover:.2f} s after the exit"

        expect(answer(page)).to_have_text(GREETING, timeout=20_000)
        expect(run_status(page)).to_have_text("Answer complete")
        expect(page.get_by_text(GREETING, exact=True)).to_have_count(1)
        state = run_state(deploy_site, run_id)
        assert (state["status"], state["messages"]) == ("completed", 3)
        assert state["stepStarts"] == [0, 0]  # the interrupted step, and its re-run
    finally:
        context.close()
        proxy.close()
