"""Calling MCP tools through the loop: answers reach the model, and every way a server can
fail — isError, a JSON-RPC error, a timeout, a crash — is an ``is_error`` result the model
sees, never a crashed leg."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types
import pytest

from deuz_django.core import GenerateTextResult, generate_text
from deuz_django.core.mcp import MCPServer, MCPServerError, MCPToolError
from deuz_django.core.mcp._client import output
from deuz_django.core.testing import ScriptedModel, reply

from .support import HTTPProcess, effects_in


@pytest.fixture(params=["stdio", "http"])
def make_server(request: pytest.FixtureRequest) -> Callable[..., MCPServer]:
    return request.getfixturevalue(f"{request.param}_server")


async def run_calls(
    server: MCPServer, *calls: tuple[str, dict[str, Any]]
) -> GenerateTextResult:
    """One step calling ``calls`` (server tool names), then a closing answer."""
    model = ScriptedModel(
        [
            reply(
                tool_calls=[
                    (f"c{i}", f"files__{name}", args)
                    for i, (name, args) in enumerate(calls, 1)
                ]
            ),
            reply(text="Done."),
        ]
    )
    return await generate_text(
        model=model, prompt="go", tools=await server.tools(), max_steps=3
    )


def results(result: GenerateTextResult) -> dict[str, tuple[Any, bool | None]]:
    assert result.tool_results is not None
    return {r.tool_call_id: (r.result, r.is_error) for r in result.tool_results}


async def test_a_call_through_generate_text_reaches_the_server(
    make_server: Callable[..., MCPServer],
) -> None:
    server = make_server()
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "files__echo", {"text": "hello over MCP"})]),
            reply(text="It said hello."),
        ]
    )
    result = await generate_text(
        model=model, prompt="Say hello", tools=await server.tools(), max_steps=3
    )

    assert result.text == "It said hello."
    assert results(result) == {"c1": ("hello over MCP", None)}
    # The model was told about the tool with the server's own schema.
    [request, follow_up] = model.requests
    [definition] = [t for t in request.tools if t.name == "files__echo"]
    assert definition.parameters["required"] == ["text"]
    assert follow_up.messages[-1].role == "tool"


async def test_an_is_error_answer_is_an_error_result_with_the_servers_text(
    make_server: Callable[..., MCPServer],
) -> None:
    result = await run_calls(make_server(), ("fail", {"why": "disk full"}))

    assert result.text == "Done."
    assert results(result) == {
        "c1": (
            "'fail' on MCP server 'files' failed: "
            "Error executing tool fail: cannot do that: disk full",
            True,
        )
    }


async def test_a_json_rpc_error_is_an_error_result(
    http_server: Callable[..., MCPServer],
) -> None:
    result = await run_calls(http_server(), ("reject", {}))

    [(text, is_error)] = results(result).values()
    assert is_error is True
    assert text == (
        "'reject' on MCP server 'files' failed: JSON-RPC error -32602: "
        "reject refuses every call"
    )
    assert result.text == "Done."


async def test_arguments_the_server_rejects_come_back_as_an_error_result(
    http_server: Callable[..., MCPServer],
) -> None:
    result = await run_calls(http_server(), ("echo", {"txt": "typo"}))

    [(text, is_error)] = results(result).values()
    assert is_error is True
    assert "'echo' on MCP server 'files' failed:" in text
    assert "text" in text


async def test_a_server_slower_than_the_request_timeout_is_an_error_result(
    http_server: Callable[..., MCPServer], http_process: HTTPProcess, unique: str
) -> None:
    server = http_server(request_timeout_ms=500)
    result = await run_calls(
        server, ("slow", {"seconds": 5}), ("echo", {"text": unique})
    )

    assert results(result) == {
        "c1": ("'slow' on MCP server 'files' failed: no answer within 500ms", True),
        "c2": (unique, None),
    }
    assert result.text == "Done."


async def test_the_loops_own_tool_timeout_passes_through_as_an_option(
    http_server: Callable[..., MCPServer],
) -> None:
    server = http_server(tool_options={"slow": {"timeout_ms": 300}})
    result = await run_calls(server, ("slow", {"seconds": 5}))

    assert results(result) == {
        "c1": ("Tool 'files__slow' timed out after 300ms and was abandoned.", True)
    }


async def test_a_server_dying_mid_call_is_an_error_result(
    stdio_server: Callable[..., MCPServer],
) -> None:
    result = await run_calls(stdio_server(), ("crash", {}))

    [(text, is_error)] = results(result).values()
    assert is_error is True
    assert text.startswith("'crash' on MCP server 'files' failed:")
    assert result.text == "Done."


async def test_each_call_opens_its_own_connection_unless_one_is_held(
    stdio_server: Callable[..., MCPServer],
) -> None:
    server = stdio_server()
    await server.tools()

    apart = [await server.call("whoami", {}), await server.call("whoami", {})]
    async with server.connected():
        held = await run_calls(server, ("whoami", {}), ("whoami", {}))

    assert apart[0] != apart[1]  # a server process per call
    [(first, _), (second, _)] = results(held).values()
    assert first == second  # one process answered both calls of the leg


async def test_arguments_that_are_not_an_object_never_reach_the_server(
    http_server: Callable[..., MCPServer],
) -> None:
    with pytest.raises(MCPServerError, match="arguments must be a JSON object"):
        await http_server().call("echo", ["not", "an", "object"])  # type: ignore[arg-type]


async def test_the_gated_side_effect_happens_once_per_call(
    stdio_server: Callable[..., MCPServer], effects: Path
) -> None:
    await run_calls(stdio_server(), ("delete_file", {"path": "/tmp/a"}))
    assert effects_in(effects) == ["delete_file:/tmp/a"]


# -- what a call's answer becomes ----------------------------------------------------------


def _answer(**fields: Any) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(**{"content": [], **fields})


def test_text_blocks_become_one_string() -> None:
    answer = _answer(
        content=[
            mcp_types.TextContent(type="text", text="line 1"),
            mcp_types.TextContent(type="text", text="line 2"),
        ],
        structured_content={"lines": 2},
    )
    assert output(answer, server="s", tool="t") == "line 1\nline 2"


def test_structured_content_alone_is_returned_as_is() -> None:
    answer = _answer(structured_content={"rows": [1, 2]})
    assert output(answer, server="s", tool="t") == {"rows": [1, 2]}


def test_other_content_is_returned_as_its_json_blocks() -> None:
    answer = _answer(
        content=[
            mcp_types.TextContent(type="text", text="a chart"),
            mcp_types.ImageContent(type="image", data="aGk=", mime_type="image/png"),
        ]
    )
    assert output(answer, server="s", tool="t") == [
        {"type": "text", "text": "a chart"},
        {"type": "image", "data": "aGk=", "mimeType": "image/png"},
    ]


def test_an_error_without_text_still_says_it_failed() -> None:
    with pytest.raises(MCPToolError, match="'t' on MCP server 's' failed: the tool"):
        output(_answer(is_error=True), server="s", tool="t")
