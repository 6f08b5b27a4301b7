"""The README's "Add to your project", applied as written to a fresh ``startproject``.

The blocks are read from README.md at test time, so the README cannot drift from what
works: the wheel (not the source tree) is installed into a new virtualenv with each
supported Django, ``django-admin startproject mysite`` makes the project, each block goes
into the file its first line names (``# mysite/settings.py — append``). Then the project
passes ``check`` and ``check --deploy``, migrates, and daphne serves it: one run is
followed over the WebSocket and approved in the admin by a real Chromium; another is
decided over the REST API and continued by ``manage.py deuz resume`` in a process of its
own.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect, sync_playwright
from websockets.sync.client import ClientConnection, connect

from tests.django.processes import wait_until
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.live_site import ROOT, free_port, kill_tree, wait_for_port

pytestmark = [pytest.mark.slow, pytest.mark.processes, pytest.mark.e2e]

SECTION = "## Add to your project"
# The first line of every block that goes into a file: its path and what to do with it.
BLOCK_TARGET = re.compile(r"# (?P<path>\S+) — (?P<how>append|replace|new file)")
FILES = {"mysite/settings.py", "mysite/urls.py", "mysite/asgi.py", "mysite/agents.py"}
PASSWORD = "a-fresh-project-password"
ANSWER = "Done: Refunded $20.00 on A-1."


def readme_blocks() -> list[tuple[str, str, str]]:
    """``(path, how, code)`` for each Python block of the section, in order."""
    text = (ROOT / "README.md").read_text()
    section = re.split(r"\n#{2,3} ", text.split(f"\n{SECTION}\n", 1)[1], maxsplit=1)[0]
    blocks = []
    for code in re.findall(r"```python\n(.*?)```", section, re.DOTALL):
        target = BLOCK_TARGET.fullmatch(code.splitlines()[0])
        assert target, f"a block without '# <file> — append|replace|new file':\n{code}"
        blocks.append((target["path"], target["how"], code))
    return blocks


def apply_blocks(project: Path) -> None:
    blocks = readme_blocks()
    assert {path for path, _how, _code in blocks} == FILES
    for path, how, code in blocks:
        target = project / path
        assert target.exists() == (how != "new file"), f"{path}: cannot {how} it"
        if how == "append":
            code = target.read_text() + "\n\n" + code
        target.write_text(code)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return next(out.glob("*.whl"))


class Project:
    """The fresh project in its own virtualenv; commands run as a user's would."""

    def __init__(self, tmp: Path, wheel: Path, django: str) -> None:
        self.django = django
        self.venv = tmp / "venv"
        self.root = tmp / "mysite"
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DJANGO_", "DEUZ_", "PYTHON", "VIRTUAL_ENV"))
            and key not in ("DATABASE_URL", "REDIS_URL")
        }
        self.env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{self.env['PATH']}"
        subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
        self.run(
            "pip", "install", "--quiet", f"{wheel}[django]", f"django=={django}",
            cwd=tmp, timeout=600,
        )  # fmt: skip
        self.run("django-admin", "startproject", "mysite", cwd=tmp)
        apply_blocks(self.root)
        self.env["DEUZ_APPROVAL_SECRET"] = secrets.token_urlsafe(48)

    def run(
        self, *args: str, cwd: Path | None = None, check: bool = True, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        kw.setdefault("timeout", 120)
        kw.setdefault("env", self.env)
        done = subprocess.run(
            [str(self.venv / "bin" / args[0]), *args[1:]],
            cwd=cwd or self.root,
            capture_output=True,
            text=True,
            **kw,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
            )
        return done

    def manage(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run("python", "manage.py", *args, **kw)


class Server:
    """``daphne mysite.asgi:application`` on a free port, with a JSON client."""

    def __init__(self, project: Project) -> None:
        self.port = free_port()
        self.http = f"http://127.0.0.1:{self.port}"
        self.log = project.root.parent / "daphne.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    str(project.venv / "bin" / "daphne"),
                    *("-b", "127.0.0.1", "-p", str(self.port)),
                    "mysite.asgi:application",
                ],
                cwd=project.root,
                env=project.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for_port(self.port, self.process, seconds=60)

    def api(self, method: str, path: str, token: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self.http}/api/deuz/{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Token {token}",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def stop(self) -> int:
        """SIGTERM, as a deploy would; returns the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=20)


def frames_until(
    socket: ClientConnection, run_id: str, legs: int, read: Sequence[Any] = ()
) -> list[Any]:
    """The frames of ``run_id`` (after those ``read`` already) through the ``done`` that
    ends its ``legs``-th leg from here."""
    frames = [frame for frame in read if frame.get("runId") == run_id]
    while sum(frame.get("type") == "done" for frame in frames) < legs:
        frame = json.loads(socket.recv(timeout=30))
        assert frame.get("type") != "error", frame
        if frame.get("runId") == run_id:
            frames.append(frame)
    return frames


def parts(frames: list[Any], kind: str) -> list[Any]:
    return [f["part"] for f in frames if f.get("part", {}).get("type") == kind]


def text_of(frames: list[Any]) -> str:
    return "".join(part["text"] for part in parts(frames, "text-delta"))


def approve_in_the_queue(page: Page, run_id: str) -> None:
    page.goto("/admin/deuz_django/approval/")
    row = page.get_by_role("row", name=re.compile("issue_refund")).filter(
        has_text=run_id[:8]
    )
    expect(row).to_contain_text('"order_id": "A-1"')
    row.get_by_role("checkbox").check()
    page.get_by_role("combobox", name="Action").select_option("approve_selected")
    page.locator(".actions").get_by_role("button", name="Run").click()
    page.get_by_role("button", name="Approve 1 call").click()
    # The leg that suspended may still hold the lease for a moment after the socket
    # said it ended: then that leg continues the run as it lets go.
    expect(page.locator(".messagelist")).to_contain_text(
        re.compile(
            f"Run {run_id} (resumed: it continues on this server|is busy; it will continue "
            "when the current leg ends)"
        )
    )


def wait_for_status(server: Server, token: str, run_id: str, status: str) -> Any:
    """The run once the API shows it ``status`` (a guard against hanging, not a timing)."""

    def reached() -> Any:
        run = server.api("GET", f"runs/{run_id}/", token)
        return run if run["status"] == status else None

    return wait_until(reached, f"run {run_id} to be {status}")


@pytest.fixture(
    scope="module", params=["6.0.*", "6.1.*"], ids=lambda django: f"django{django[:3]}"
)
def project(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    wheel: Path,
) -> Project:
    return Project(tmp_path_factory.mktemp("fresh"), wheel, request.param)


def test_the_readme_blocks_make_a_fresh_project_that_passes_its_checks(
    project: Project,
) -> None:
    version = project.run("python", "-m", "django", "--version").stdout
    assert version.startswith(project.django.rstrip("*")), version
    without_secret = {
        k: v for k, v in project.env.items() if k != "DEUZ_APPROVAL_SECRET"
    }
    missing = project.manage("check", env=without_secret, check=False)
    assert missing.returncode != 0
    assert "deuz_django.E001" in missing.stderr

    assert "no issues" in project.manage("check").stdout
    deploy = project.manage("check", "--deploy", check=False)
    found = set(re.findall(r"\((\w+\.[EW]\d+)\)", deploy.stdout + deploy.stderr))
    # Only Django's own advice for a startproject (and Django 6.1's console mail backend
    # in it), and the documented W007: under the immediate backend, legs run in the
    # server's processes.
    django_own = re.compile(r"security\.W\d+|mail\.E001")
    assert {
        code
        for code in found
        if not django_own.fullmatch(code) and code != "deuz_django.W007"
    } == set(), deploy.stderr
    assert "deuz_django.W007" in found


def test_runserver_is_daphnes_and_serves_the_api_schema(project: Project) -> None:
    port = free_port()
    runserver = subprocess.Popen(
        [
            str(project.venv / "bin" / "python"),
            *("manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"),
        ],
        cwd=project.root,
        env=project.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port, runserver, seconds=60)
        schema = f"http://127.0.0.1:{port}/api/deuz/schema/"
        with urllib.request.urlopen(schema, timeout=30) as response:
            assert response.headers["Server"] == "daphne"  # not Django's WSGIServer
            assert b"Deuz API" in response.read()
    finally:
        kill_tree(runserver)


def test_a_gated_call_is_approved_in_the_admin_and_resumed_from_the_command(
    project: Project,
) -> None:
    project.manage("migrate", "--noinput")
    project.manage(
        "createsuperuser", "--noinput", "--username", "admin", "--email", "a@b.example",
        env={**project.env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD},
    )  # fmt: skip
    token = project.manage("drf_create_token", "admin").stdout.split()[2]
    server = Server(project)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            page = browser.new_context(base_url=server.http).new_page()
            page.goto("/admin/login/?next=/admin/")
            page.get_by_label("Username").fill("admin")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            expect(page).to_have_url(re.compile("/admin/$"))
            session = next(
                c["value"] for c in page.context.cookies() if c["name"] == "sessionid"
            )

            # One run followed over the socket, approved in the admin's queue.
            with connect(
                f"ws://127.0.0.1:{server.port}/ws/deuz/",
                additional_headers={
                    "Cookie": f"sessionid={session}",
                    "Origin": server.http,
                },
            ) as socket:
                socket.send(
                    json.dumps(
                        {"type": "start", "agent": "assistant", "text": "Refund A-1"}
                    )
                )
                early = [json.loads(socket.recv(timeout=30))]
                while early[-1].get("type") != "started":  # parts may come first
                    early.append(json.loads(socket.recv(timeout=30)))
                run_id = early[-1]["runId"]
                first = frames_until(socket, run_id, 1, early[:-1])
                [asked] = parts(first, "tool-approval-request")
                assert asked["toolName"] == "issue_refund", asked
                approve_in_the_queue(page, run_id)
                resumed = frames_until(socket, run_id, 1)
            assert text_of(resumed) == ANSWER
            assert parts(resumed, "finish"), resumed
            assert wait_for_status(server, token, run_id, "completed")
            browser.close()

        # Another decided over the REST API, continued by the command in its own process.
        run_id = server.api(
            "POST", "runs/", token, {"agent": "assistant", "text": "Refund A-1"}
        )["runId"]
        run = wait_for_status(server, token, run_id, "suspended")
        [pending] = run["pendingApprovals"]
        assert pending["approvalId"] == "call_1"  # the id the README's command names
        verdict = {
            "approvalId": pending["approvalId"],
            "approved": True,
            "token": pending["token"],
        }
        server.api(
            "POST",
            f"runs/{run_id}/verdicts/",
            token,
            {"verdicts": [verdict], "resume": False},
        )
        assert server.api("GET", f"runs/{run_id}/", token)["status"] == "suspended"
        project.manage("deuz", "resume", run_id)
        assert wait_for_status(server, token, run_id, "completed")
        messages = server.api("GET", f"runs/{run_id}/messages/", token)
        assert ANSWER in json.dumps(messages)

        assert server.stop() == 0
        log = server.log.read_text()
        assert "Traceback" not in log
        assert "RuntimeWarning" not in log
    except BaseException:
        print(f"daphne's output:\n{server.log.read_text()}")
        raise
    finally:
        if server.process.poll() is None:
            kill_tree(server.process)
