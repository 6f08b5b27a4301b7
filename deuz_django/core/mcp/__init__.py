"""MCP servers as tools of an agent, over the official ``mcp`` SDK (``deuz-django[mcp]``).

>>> files = MCPServer(
...     "files",
...     Stdio("python", ["-m", "files_server"]),
...     tool_options={"delete_file": {"needs_approval": True}},
... )
>>> crm = MCPServer(
...     "crm",
...     StreamableHTTP("https://crm.example.com/mcp", headers={"Authorization": "Bearer …"}),
...     options={"needs_approval": True, "approval_permission": "crm.approve_call"},
... )
>>> tools = [*await files.tools(), *crm.tools_sync()]   # MCPTool: a Tool with a server
>>> result = await generate_text(model=model, prompt="Tidy up", tools=tools)

Each tool is a :class:`~deuz_django.core.Tool` built from the server's listing: its JSON
Schema is the tool's input schema (arguments are checked by the server, whose complaints
come back as ``is_error`` results), and it is named ``files__delete_file`` so the server
shows wherever the tool does.

**When the server is asked.** The tool list is fetched on first use (``await
server.tools()``, or ``server.tools_sync()`` in an agent spec builder) and cached on the
server object for the life of the process; ``refresh=True`` lists again. The list belongs to
the agent spec, never to a checkpoint: a run suspended in one process and resumed in another
gets its tools by rebuilding the spec there, which lists the server in that process.
``tool_options`` naming a tool the server does not list is an error at listing, so a renamed
tool cannot silently lose its approval policy.

**How calls connect.** Each call opens its own connection (a fresh subprocess for stdio,
an initialize/call/close exchange for HTTP) unless a connection is held by ``async with
server.connected():`` around the calls — e.g. around a leg. Per call, nothing outlives the
call: a run that suspends for a day, or moves to another process, has no connection to
lose, and no server-side session state leaks between runs or users. The price is the set-up
per call; hold a connection for a leg when the server is slow to start.

**Failures.** Inside a run nothing here raises out of a leg: an ``isError`` answer, a
JSON-RPC error, a timeout (``request_timeout_ms``) or a dead server become the call's
``is_error`` result, naming the server and the tool. A server that cannot be reached when its
tools are listed raises :class:`MCPServerError` naming it.
"""

from ._server import MCPServer, MCPTool
from ._transports import Stdio, StreamableHTTP
from .exceptions import MCPNotInstalledError, MCPServerError, MCPToolError

__all__ = [
    "MCPNotInstalledError",
    "MCPServer",
    "MCPServerError",
    "MCPTool",
    "MCPToolError",
    "Stdio",
    "StreamableHTTP",
]
