"""The official AG-UI client (``@ag-ui/client``, from npm) as the tests drive it.

``tests/protocols/node/`` pins it (package.json and package-lock.json); :func:`install`
runs ``npm ci`` there when ``node_modules`` is missing, so a plain pytest run works on
a fresh machine. :func:`drive` runs ``drive.mjs`` with one plan and returns what the
client saw (see that script)."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

from tests.live_site import Daphne

NODE_DIR = Path(__file__).resolve().parent / "node"
USER_MESSAGE = {"id": "u1", "role": "user", "content": "Email Ann, please."}


def endpoint(server: Daphne, agent: str = "agui_mailer") -> str:
    return f"{server.http}/api/deuz/agents/{agent}/ag-ui/"


def start(
    server: Daphne, token: str, agent: str = "agui_mailer", **plan: Any
) -> tuple[str, dict[str, Any]]:
    """A new thread of ``agent``, asked to email Ann; its id and what the client saw."""
    thread = uuid.uuid4().hex
    result = drive(
        url=endpoint(server, agent),
        token=token,
        threadId=thread,
        runId="run-1",
        messages=[USER_MESSAGE],
        **plan,
    )
    return thread, result


def answer(interrupt: dict[str, Any], **payload: Any) -> dict[str, Any]:
    """A resolved resume entry that echoes the interrupt's metadata (its token)."""
    return {
        "interruptId": interrupt["id"],
        "status": "resolved",
        "payload": payload,
        "metadata": interrupt["metadata"],
    }


def resume(
    server: Daphne,
    token: str,
    thread: str,
    *entries: Any,
    run: str = "run-2",
    agent: str = "agui_mailer",
) -> dict[str, Any]:
    return drive(
        url=endpoint(server, agent),
        token=token,
        threadId=thread,
        runId=run,
        resume=list(entries),
    )


def text_of(result: dict[str, Any]) -> str:
    return "".join(e["delta"] for e in of_type(result, "TEXT_MESSAGE_CONTENT"))


def install() -> None:
    """``npm ci`` in ``tests/protocols/node`` unless its packages are there."""
    if (NODE_DIR / "node_modules" / "@ag-ui" / "client").exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is needed for the AG-UI client tests (Node 20+)")
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True, timeout=600
    )


def drive(**plan: Any) -> dict[str, Any]:
    """Run the client once with ``plan``; what it saw, as ``drive.mjs`` prints it."""
    done = subprocess.run(
        ["node", "drive.mjs", json.dumps(plan)],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": "/usr/bin:/bin:/usr/local/bin",
            "SUPPRESS_TRANSFORMATION_WARNINGS": "1",
        },
    )
    if done.returncode != 0:
        raise RuntimeError(f"drive.mjs failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def types(result: dict[str, Any]) -> list[str]:
    return [event["type"] for event in result["events"]]


def of_type(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [event for event in result["events"] if event["type"] == kind]
