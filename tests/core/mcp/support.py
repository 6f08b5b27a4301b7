"""What the MCP tests share beyond fixtures: the test server, its effects file, a fresh
interpreter. Django tests use the same server (``tests.django.mcp_agents``)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from deuz_django.core.mcp import Stdio
from tests.live_site import ROOT

SERVER = Path(__file__).with_name("server.py")


def effects_in(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def run_python(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter at the repository's root."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def stdio_transport(effects: Path) -> Stdio:
    return Stdio(sys.executable, [str(SERVER), "stdio", "--log", str(effects)])


@dataclass(frozen=True)
class HTTPProcess:
    url: str
    effects: Path
