"""How to reach an MCP server: a subprocess over stdio, or a URL over streamable HTTP.

Plain values, no SDK: an agents module can describe its servers without the extra loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class Stdio:
    """Start ``command`` with ``args`` and talk JSON-RPC over its stdin and stdout.

    ``env`` is added to the small safe environment the SDK passes on (``PATH``, ``HOME``…),
    never the whole of ours; the server's stderr is inherited.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None

    def describe(self) -> str:
        return "stdio: " + " ".join([self.command, *self.args])


@dataclass(frozen=True, slots=True)
class StreamableHTTP:
    """POST JSON-RPC to ``url`` (MCP's streamable HTTP transport); ``headers`` go with every
    request, e.g. ``{"Authorization": f"Bearer {token}"}``."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        # Scheme, host and path only: userinfo and query strings may carry secrets.
        parts = urlsplit(self.url)
        return (
            f"http: {parts.scheme}://{parts.hostname or ''}"
            + (f":{parts.port}" if parts.port else "")
            + parts.path
        )


Transport = Stdio | StreamableHTTP
