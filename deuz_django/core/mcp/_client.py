"""The SDK side: open a connection to a server, list its tools, read what a call answers,
and say what went wrong in words a model (or an operator) can act on.

Imported only when a server is used, so the core imports without the ``mcp`` extra.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from importlib import metadata
from typing import Any

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ._transports import Stdio, Transport
from .exceptions import MCPServerError, MCPToolError

# A server that keeps handing out cursors is cut off here rather than listed forever.
MAX_LIST_PAGES = 100


def _client_info() -> mcp_types.Implementation:
    try:
        version = metadata.version("deuz-django")
    except metadata.PackageNotFoundError:
        version = "0"
    return mcp_types.Implementation(name="deuz-django", version=version)


@asynccontextmanager
async def open_client(
    transport: Transport, *, timeout_ms: float
) -> AsyncIterator[Client]:
    """A connected, initialized client; every request it makes waits ``timeout_ms`` at most."""
    seconds = timeout_ms / 1000
    async with AsyncExitStack() as stack:
        if isinstance(transport, Stdio):
            target: Any = StdioServerParameters(
                command=transport.command,
                args=list(transport.args),
                env=dict(transport.env) if transport.env is not None else None,
                cwd=transport.cwd,
            )
        else:
            # No HTTP read timeout: a response may stream; the MCP request timeout bounds it.
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=dict(transport.headers),
                    timeout=httpx2.Timeout(seconds, read=None),
                )
            )
            target = streamable_http_client(transport.url, http_client=http)
        client = Client(
            target, read_timeout_seconds=seconds, client_info=_client_info()
        )
        yield await stack.enter_async_context(client)


async def list_tools(client: Client, *, server: str) -> list[mcp_types.Tool]:
    """Every tool the server lists, page by page."""
    listed: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        listed.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return listed
    raise MCPServerError(
        f"MCP server {server!r} lists tools over more than {MAX_LIST_PAGES} pages.",
        server=server,
    )


def output(result: mcp_types.CallToolResult, *, server: str, tool: str) -> Any:
    """What a call answered, as the tool result the model sees.

    Text content becomes one string (servers also send structured results as JSON text);
    structured content alone is returned as is; anything else (images, audio, resources) as
    the content blocks' JSON. ``isError`` raises :class:`MCPToolError` with the server's text.
    """
    blocks = result.content
    texts = [b.text for b in blocks if isinstance(b, mcp_types.TextContent)]
    if result.is_error:
        detail = "\n".join(texts) or "the tool reported an error without a message"
        raise MCPToolError(
            f"{tool!r} on MCP server {server!r} failed: {detail}", server=server
        )
    if blocks and len(texts) == len(blocks):
        return "\n".join(texts)
    if not blocks and result.structured_content is not None:
        return result.structured_content
    return [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in blocks]


def _leaf(error: BaseException) -> BaseException:
    """The first real cause inside the task-group wrappers the SDK's transports raise."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def detail(error: BaseException, *, timeout_ms: float) -> str:
    """One line saying what went wrong, without the SDK's wrapping."""
    leaf = _leaf(error)
    if isinstance(leaf, MCPError) and leaf.code == mcp_types.REQUEST_TIMEOUT:
        return f"no answer within {timeout_ms:g}ms"
    if isinstance(leaf, TimeoutError):
        return f"no answer within {timeout_ms:g}ms"
    if isinstance(leaf, MCPError):
        return f"JSON-RPC error {leaf.code}: {leaf.message}"
    text = str(leaf)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__
