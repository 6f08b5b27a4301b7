"""An MCP server as a source of tools: list once per process, call through a connection
opened for the call (or held by :meth:`MCPServer.connected`)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import re
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..exceptions import InvalidInputError
from ..tools import Execute, Tool, ToolContext
from ._transports import Transport
from .exceptions import MCPNotInstalledError, MCPServerError

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import Tool as ListedTool

DEFAULT_REQUEST_TIMEOUT_MS = 30_000.0
_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
# What the server decides, never the options: a tool's identity, schema and executor.
_NOT_OPTIONS = frozenset({"name", "parameters", "execute", "validate", "sub_tools"})

# Connections held by ``MCPServer.connected()`` for the calls made in this context.
_held: ContextVar[Mapping[MCPServer, Client] | None] = ContextVar(
    "deuz_mcp_held", default=None
)


def _require_sdk() -> None:
    """Fail early, naming the extra, when the SDK is missing; afterwards the SDK-facing
    module (``_client``) is imported where it is used."""
    try:
        importlib.import_module("mcp")
    except ImportError as exc:
        raise MCPNotInstalledError(
            "MCP servers need the official 'mcp' SDK, which is not installed: "
            'pip install "deuz-django[mcp]"'
        ) from exc


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MCPTool(Tool):
    """A tool an MCP server serves: ``server`` names the server, ``remote_name`` is the
    tool's own name there (``name`` carries the server's prefix)."""

    server: str
    remote_name: str


def _tool_options(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    allowed = {f.name for f in dataclasses.fields(Tool)} - _NOT_OPTIONS
    for key in options:
        if key not in allowed:
            raise InvalidInputError(
                f"{where}[{key!r}] is not a Tool option; "
                f"use one of: {', '.join(sorted(allowed))}"
            )
    return dict(options)


class MCPServer:
    """The tools of one MCP server, with the approval policy that guards them.

    ``options`` are :class:`~deuz_django.core.Tool` keyword arguments applied to every tool
    of the server (``needs_approval``, ``approval_permission``, ``approval_by_owner``,
    ``timeout_ms``, …); ``tool_options`` maps a tool's name on the server to keyword
    arguments that override them for that tool. Tools are named ``tool_prefix + name``
    (``"<server name>__"`` by default, ``""`` keeps the server's names), so the server shows
    in every call, approval and log line, and two servers' tools never collide.

    ``request_timeout_ms`` bounds each request to the server — starting it, listing, each
    call. The tool list is fetched on first use and kept for the life of the process.
    """

    __slots__ = (
        "_listed",
        "_lock",
        "name",
        "options",
        "request_timeout_ms",
        "tool_options",
        "tool_prefix",
        "transport",
    )

    def __init__(
        self,
        name: str,
        transport: Transport,
        *,
        options: Mapping[str, Any] | None = None,
        tool_options: Mapping[str, Mapping[str, Any]] | None = None,
        tool_prefix: str | None = None,
        request_timeout_ms: float = DEFAULT_REQUEST_TIMEOUT_MS,
    ) -> None:
        _require_sdk()
        if not _NAME.fullmatch(name):
            raise InvalidInputError(
                f"MCP server name {name!r}: use 1-40 letters, digits, '_' or '-' "
                "(it prefixes tool names, which models restrict to those characters)"
            )
        if request_timeout_ms <= 0:
            raise InvalidInputError(
                f"MCP server {name!r}: request_timeout_ms must be positive"
            )
        self.name = name
        self.transport = transport
        self.options = _tool_options(options or {}, f"MCP server {name!r}: options")
        self.tool_options = {
            tool: _tool_options(given, f"MCP server {name!r}: tool_options[{tool!r}]")
            for tool, given in (tool_options or {}).items()
        }
        self.tool_prefix = f"{name}__" if tool_prefix is None else tool_prefix
        self.request_timeout_ms = float(request_timeout_ms)
        self._listed: tuple[MCPTool, ...] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<MCPServer {self.name!r} ({self.transport.describe()})>"

    # -- listing ------------------------------------------------------------------------

    async def tools(self, *, refresh: bool = False) -> tuple[MCPTool, ...]:
        """The server's tools, listed on first use and cached; ``refresh=True`` lists again
        (a failed refresh keeps the previous list). Raises :class:`MCPServerError` naming
        the server when it cannot be reached."""
        if self._listed is not None and not refresh:
            return self._listed
        from . import _client as sdk

        try:
            async with AsyncExitStack() as stack:
                client = await self._client(stack)
                listed = await sdk.list_tools(client, server=self.name)
        except MCPServerError:
            raise
        except Exception as exc:
            raise MCPServerError(
                f"Could not list the tools of MCP server {self.name!r} "
                f"({self.transport.describe()}): "
                f"{sdk.detail(exc, timeout_ms=self.request_timeout_ms)}",
                server=self.name,
            ) from exc
        self._listed = self._build(listed)
        return self._listed

    def tools_sync(self, *, refresh: bool = False) -> tuple[MCPTool, ...]:
        """:meth:`tools` for synchronous code such as an agent spec builder.

        The first call (or a refresh) lists the server on an event loop of its own, in a
        helper thread, so it works whether or not the calling thread runs a loop; later
        calls return the cached list without any I/O.
        """
        with self._lock:
            if self._listed is not None and not refresh:
                return self._listed
            with ThreadPoolExecutor(1, thread_name_prefix="deuz-mcp") as pool:
                return pool.submit(
                    lambda: asyncio.run(self.tools(refresh=refresh))
                ).result()

    def _build(self, listed: Sequence[ListedTool]) -> tuple[MCPTool, ...]:
        names = {t.name for t in listed}
        unknown = sorted(set(self.tool_options) - names)
        if unknown:
            raise InvalidInputError(
                f"MCP server {self.name!r}: tool_options name tools it does not list: "
                f"{', '.join(unknown)} (it lists: {', '.join(sorted(names)) or 'none'})"
            )
        return tuple(
            MCPTool(
                name=self.tool_prefix + t.name,
                parameters=dict(t.input_schema),
                execute=self._executor(t.name),
                server=self.name,
                remote_name=t.name,
                **{
                    "description": t.description,
                    **self.options,
                    **self.tool_options.get(t.name, {}),
                },
            )
            for t in listed
        )

    # -- calling ------------------------------------------------------------------------

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        """Hold one connection for every call to this server made inside the block (and in
        tasks it starts), e.g. around a leg: ``async with files.connected(): await
        generate_text(...)``. Outside such a block each call opens its own connection."""
        from . import _client as sdk

        async with AsyncExitStack() as stack:
            try:
                client = await self._client(stack)
            except Exception as exc:
                raise MCPServerError(
                    f"Could not connect to MCP server {self.name!r} "
                    f"({self.transport.describe()}): "
                    f"{sdk.detail(exc, timeout_ms=self.request_timeout_ms)}",
                    server=self.name,
                ) from exc
            token = _held.set({**(_held.get() or {}), self: client})
            try:
                yield
            finally:
                _held.reset(token)

    async def _client(self, stack: AsyncExitStack) -> Client:
        from . import _client as sdk

        opened = sdk.open_client(self.transport, timeout_ms=self.request_timeout_ms)
        return await stack.enter_async_context(opened)

    def _executor(self, remote_name: str) -> Execute:
        async def execute(args: Any, ctx: ToolContext) -> Any:
            return await self.call(remote_name, args)

        return execute

    async def call(self, tool: str, arguments: Mapping[str, Any] | None) -> Any:
        """Call ``tool`` (its name on the server) and return its output; every failure
        raises :class:`MCPServerError` with a message naming the server and the tool."""
        if arguments is not None and not isinstance(arguments, Mapping):
            raise MCPServerError(
                f"{tool!r} on MCP server {self.name!r}: arguments must be a JSON object, "
                f"not {type(arguments).__name__}",
                server=self.name,
            )
        from . import _client as sdk

        try:
            held = (_held.get() or {}).get(self)
            if held is not None:
                result = await held.call_tool(tool, dict(arguments or {}))
            else:
                async with AsyncExitStack() as stack:
                    client = await self._client(stack)
                    result = await client.call_tool(tool, dict(arguments or {}))
        except Exception as exc:
            raise MCPServerError(
                f"{tool!r} on MCP server {self.name!r} failed: "
                f"{sdk.detail(exc, timeout_ms=self.request_timeout_ms)}",
                server=self.name,
            ) from exc
        return sdk.output(result, server=self.name, tool=tool)
