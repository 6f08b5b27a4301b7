"""Fixtures for the MCP tests: the test server (``server.py``) over stdio, as a subprocess
per connection, and over streamable HTTP, as one real server process on a loopback port.

Each test gets its own effects file; the HTTP server's effects file is shared, so tests
using it look for lines carrying their own unique arguments.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deuz_django.core.mcp import MCPServer, StreamableHTTP
from tests.live_site import free_port, wait_for_port

from .support import SERVER, HTTPProcess, stdio_transport


@pytest.fixture(scope="session")
def http_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HTTPProcess]:
    effects = tmp_path_factory.mktemp("mcp-http") / "effects.log"
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port), "--log", str(effects)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, seconds=60)
        yield HTTPProcess(f"http://127.0.0.1:{port}/mcp", effects)
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def effects(tmp_path: Path) -> Path:
    return tmp_path / "effects.log"


@pytest.fixture
def stdio_server(effects: Path) -> Callable[..., MCPServer]:
    """A fresh ``files`` server object over stdio (nothing listed yet)."""

    def make(**options: Any) -> MCPServer:
        return MCPServer("files", stdio_transport(effects), **options)

    return make


@pytest.fixture
def http_server(http_process: HTTPProcess) -> Callable[..., MCPServer]:
    """A fresh ``files`` server object over HTTP (nothing listed yet)."""

    def make(**options: Any) -> MCPServer:
        return MCPServer("files", StreamableHTTP(http_process.url), **options)

    return make


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:8]
