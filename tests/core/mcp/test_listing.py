"""Listing an MCP server: its tools become ``Tool``s with the server's schemas, the approval
policy set per server and per tool, cached per process, with clear errors."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

import pytest

from deuz_django.core import InvalidInputError, Tool
from deuz_django.core.mcp import (
    MCPServer,
    MCPServerError,
    MCPTool,
    Stdio,
    StreamableHTTP,
)
from tests.live_site import free_port

SERVER_TOOLS = {"crash", "delete_file", "echo", "fail", "reject", "slow", "whoami"}


@pytest.fixture(params=["stdio", "http"])
def make_server(request: pytest.FixtureRequest) -> Callable[..., MCPServer]:
    return request.getfixturevalue(f"{request.param}_server")


async def test_listed_tools_carry_the_servers_names_and_schemas(
    make_server: Callable[..., MCPServer],
) -> None:
    tools = {t.remote_name: t for t in await make_server().tools()}

    assert set(tools) == SERVER_TOOLS
    echo = tools["echo"]
    assert isinstance(echo, Tool)
    assert isinstance(echo, MCPTool)
    assert echo.name == "files__echo"
    assert echo.server == "files"
    assert echo.description == "Echo the text back."
    assert echo.parameters["properties"]["text"]["type"] == "string"
    assert echo.parameters["required"] == ["text"]
    assert echo.validate is None  # the server checks arguments
    assert echo.needs_approval is False


async def test_options_apply_to_every_tool_and_tool_options_override_them(
    stdio_server: Callable[..., MCPServer],
) -> None:
    server = stdio_server(
        options={"needs_approval": True, "approval_permission": "files.approve"},
        tool_options={
            "echo": {"needs_approval": False},
            "delete_file": {"approval_by_owner": False, "timeout_ms": 5000},
        },
    )
    tools = {t.remote_name: t for t in await server.tools()}

    assert tools["echo"].needs_approval is False
    assert tools["echo"].approval_permission == "files.approve"
    delete = tools["delete_file"]
    assert delete.needs_approval is True
    assert delete.approval_permission == "files.approve"
    assert delete.approval_by_owner is False
    assert delete.timeout_ms == 5000
    assert tools["whoami"].needs_approval is True
    assert tools["whoami"].approval_by_owner is True


async def test_a_prefix_can_be_chosen_or_dropped(
    stdio_server: Callable[..., MCPServer],
) -> None:
    assert {t.name for t in await stdio_server(tool_prefix="").tools()} == SERVER_TOOLS
    named = {t.name for t in await stdio_server(tool_prefix="fs_").tools()}
    assert "fs_echo" in named


def test_an_option_that_is_not_a_tool_keyword_is_refused_at_once() -> None:
    transport = StreamableHTTP("http://127.0.0.1:9/mcp")
    with pytest.raises(InvalidInputError, match=r"options\['needs_aproval'\]"):
        MCPServer("files", transport, options={"needs_aproval": True})
    with pytest.raises(InvalidInputError, match=r"tool_options\['echo'\]\['execute'\]"):
        MCPServer("files", transport, tool_options={"echo": {"execute": print}})


@pytest.mark.parametrize("name", ["", "my files", "a.b", "x" * 41])
def test_a_server_name_must_fit_in_tool_names(name: str) -> None:
    with pytest.raises(InvalidInputError, match="MCP server name"):
        MCPServer(name, StreamableHTTP("http://127.0.0.1:9/mcp"))


async def test_tool_options_naming_a_tool_the_server_lacks_fail_at_listing(
    http_server: Callable[..., MCPServer],
) -> None:
    server = http_server(tool_options={"delete_files": {"needs_approval": True}})
    with pytest.raises(InvalidInputError, match=r"'files'.*delete_files.*delete_file"):
        await server.tools()


async def test_the_list_is_cached_until_refreshed(
    http_server: Callable[..., MCPServer],
) -> None:
    server = http_server()
    first = await server.tools()
    assert await server.tools() is first
    refreshed = await server.tools(refresh=True)
    assert refreshed is not first
    assert [t.name for t in refreshed] == [t.name for t in first]


def test_tools_sync_lists_once_from_synchronous_code(
    http_server: Callable[..., MCPServer],
) -> None:
    server = http_server()
    first = server.tools_sync()
    assert {t.remote_name for t in first} == SERVER_TOOLS
    assert server.tools_sync() is first


async def test_tools_sync_also_works_on_a_thread_running_a_loop(
    http_server: Callable[..., MCPServer],
) -> None:
    # An agent spec builder may be called from async code; the listing gets its own loop.
    assert asyncio.get_running_loop()
    assert {t.remote_name for t in http_server().tools_sync()} == SERVER_TOOLS


async def test_an_unreachable_http_server_is_named_in_the_error() -> None:
    server = MCPServer("crm", StreamableHTTP(f"http://127.0.0.1:{free_port()}/mcp"))
    with pytest.raises(MCPServerError) as caught:
        await server.tools()
    assert caught.value.server == "crm"
    message = str(caught.value)
    assert "Could not list the tools of MCP server 'crm'" in message
    assert "http: http://127.0.0.1:" in message
    assert "ConnectError" in message


def test_a_server_that_cannot_start_is_named_in_the_error() -> None:
    server = MCPServer("files", Stdio("/nonexistent/mcp-server", ["--flag"]))
    with pytest.raises(MCPServerError) as caught:
        server.tools_sync()
    assert caught.value.server == "files"
    assert "MCP server 'files' (stdio: /nonexistent/mcp-server --flag)" in str(
        caught.value
    )


async def test_a_server_that_never_answers_times_out_with_its_name() -> None:
    # A process that reads nothing and says nothing: initialize never gets an answer.
    silent = Stdio(sys.executable, ["-c", "import time; time.sleep(60)"])
    server = MCPServer("mute", silent, request_timeout_ms=1500)
    with pytest.raises(MCPServerError, match=r"'mute'.*no answer within 1500ms"):
        await server.tools()


def test_http_descriptions_leave_credentials_out() -> None:
    transport = StreamableHTTP(
        "https://user:secret@crm.example.com:8443/mcp?token=abc",
        headers={"Authorization": "Bearer abc"},
    )
    assert transport.describe() == "http: https://crm.example.com:8443/mcp"
