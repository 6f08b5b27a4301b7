"""The AG-UI endpoint in the API's OpenAPI schema: a plain (streaming) view, which
drf-spectacular does not see, added by a postprocessing hook. The body is AG-UI's own
``RunAgentInput`` (its full schema is the protocol's: https://docs.ag-ui.com); what is
given here is what the endpoint reads of it."""

from __future__ import annotations

from typing import Any

_ENTRY = {
    "type": "object",
    "description": "An answer to one interrupt: status resolved (with the payload the "
    "interrupt's responseSchema describes) or cancelled (a denial); metadata.deuz.token "
    "echoes the interrupt's signed token.",
    "properties": {
        "interruptId": {"type": "string"},
        "status": {"type": "string", "enum": ["resolved", "cancelled"]},
        "payload": {},
        "metadata": {"type": "object", "additionalProperties": True},
    },
    "required": ["interruptId", "status"],
}
RUN_AGENT_INPUT = {
    "type": "object",
    "description": "AG-UI's RunAgentInput. threadId is the run's id; a new one starts a "
    "run with the messages' text, resume answers the thread's interrupts.",
    "properties": {
        "threadId": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,100}$"},
        "runId": {"type": "string"},
        "messages": {
            "type": "array",
            "description": "AG-UI messages; a new thread starts with their user and "
            "assistant text.",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "role": {"type": "string", "enum": ["user", "assistant"]},
                    "content": {"type": "string"},
                },
                "required": ["id", "role", "content"],
                "additionalProperties": True,
            },
        },
        "resume": {"type": "array", "items": _ENTRY},
        "state": {},
        "tools": {"type": "array", "items": {}},
        "context": {"type": "array", "items": {}},
        "forwardedProps": {},
    },
    "required": ["threadId", "runId", "messages"],
}
_ERROR = {"$ref": "#/components/schemas/Error"}


def _operation() -> dict[str, Any]:
    def error(description: str) -> dict[str, Any]:
        return {
            "description": description,
            "content": {"application/json": {"schema": _ERROR}},
        }

    return {
        "operationId": "agents_ag_ui_run",
        "summary": "Run an agent over AG-UI 1.0",
        "description": "Streams the run as AG-UI events (text/event-stream), each "
        "event's SSE id the thread's journal cursor; a Last-Event-ID header rejoins "
        "and records nothing. See the documentation's AG-UI page.",
        "tags": ["agents"],
        "parameters": [
            {
                "name": "name",
                "in": "path",
                "required": True,
                "schema": {"type": "string"},
            },
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": "Rejoin: the events after this id.",
            },
        ],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": RUN_AGENT_INPUT}},
        },
        "responses": {
            "200": {
                "description": "AG-UI events over SSE, until the run pauses or ends.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            "400": error("Not a RunAgentInput, or a resume that breaks the contract."),
            "401": error("Not signed in."),
            "403": error("Signed in, but may not decide an interrupt answered."),
            "404": error("No such agent, or no such thread of the caller's."),
            "409": error("The thread waits on interrupts, or cannot take new input."),
            "413": error("The body is too large."),
        },
        "security": [{"tokenAuth": []}, {"cookieAuth": []}, {}],
    }


def add_agui_endpoint(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the AG-UI endpoint beside the API's own."""
    paths = result.get("paths", {})
    anchor = next((p for p in paths if p.endswith("/approvals/")), None)
    if anchor is not None:
        prefix = anchor.removesuffix("approvals/")
        paths[f"{prefix}agents/{{name}}/ag-ui/"] = {"post": _operation()}
    return result
