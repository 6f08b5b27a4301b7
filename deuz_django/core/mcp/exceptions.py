"""Errors of the MCP integration.

The hierarchy::

    DeuzError (core)
    ├── MCPNotInstalledError  the ``mcp`` extra is missing (also an ImportError)
    └── MCPServerError        an MCP server could not be reached, timed out, or answered
        │                     with a JSON-RPC error; ``server`` names it
        └── MCPToolError      the server ran the tool and reported an error (``isError``)

Options that are not ``Tool`` keyword arguments, or name a tool the server does not list,
raise the core's :class:`~deuz_django.core.exceptions.InvalidInputError`. Inside a run these
errors never escape a leg: a failed call becomes an ``is_error`` tool result with the
error's message, which the model can react to.
"""

from __future__ import annotations

from ..exceptions import DeuzError


class MCPNotInstalledError(DeuzError, ImportError):
    """The official ``mcp`` SDK is not installed: ``pip install "deuz-django[mcp]"``."""

    code = "mcp_not_installed"


class MCPServerError(DeuzError):
    """An MCP server failed: unreachable, too slow, or a protocol-level error."""

    code = "mcp_server_error"

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class MCPToolError(MCPServerError):
    """The server ran the tool and answered with ``isError``: the tool's own failure."""

    code = "mcp_tool_error"
