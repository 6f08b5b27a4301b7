"""OpenAPI pieces drf-spectacular cannot derive: Deuz's message JSON form, and the scope
of the served schema (the Deuz endpoints only)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension

_NULLABLE_STRING = {"type": "string", "nullable": True}
_NULLABLE_BOOL = {"type": "boolean", "nullable": True}
_NULLABLE_OBJECT = {"type": "object", "additionalProperties": True, "nullable": True}


def _part(kind: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"type": {"type": "string", "enum": [kind]}, **properties},
        "required": ["type", *required],
    }


PART_SCHEMA: dict[str, Any] = {
    "oneOf": [
        _part("text", {"text": {"type": "string"}}, ["text"]),
        _part(
            "image",
            {
                "image": {
                    "type": "string",
                    "description": "Standard base64, a data URL or an http(s) URL.",
                },
                "mediaType": _NULLABLE_STRING,
            },
            ["image"],
        ),
        _part(
            "tool_use",
            {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "input": {"description": "The call's arguments (any JSON value)."},
                "providerMetadata": _NULLABLE_OBJECT,
            },
            ["id", "name", "input"],
        ),
        _part(
            "tool_result",
            {
                "toolUseId": {"type": "string"},
                "result": {"description": "Any JSON value."},
                "isError": _NULLABLE_BOOL,
            },
            ["toolUseId"],
        ),
        _part(
            "reasoning",
            {
                "text": {"type": "string"},
                "signature": _NULLABLE_STRING,
                "encrypted": _NULLABLE_BOOL,
                "redacted": _NULLABLE_BOOL,
            },
            ["text"],
        ),
    ]
}

MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A message in Deuz's JSON form (bytes appear as standard base64 text).",
    "properties": {
        "role": {"type": "string", "enum": ["system", "user", "assistant", "tool"]},
        "content": {
            "oneOf": [{"type": "string"}, {"type": "array", "items": PART_SCHEMA}]
        },
        "providerMetadata": _NULLABLE_OBJECT,
    },
    "required": ["role", "content"],
}

USAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Cumulative token counts (inputTokens, outputTokens, totalTokens, ...).",
    "additionalProperties": {"type": "integer"},
}


class StartRunSchema(OpenApiSerializerExtension):
    """A start request needs ``messages`` or ``text`` (or both)."""

    target_class = "deuz_django.api.serializers.StartRunSerializer"

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_basic_serializer(
            self.target, direction
        )
        schema["anyOf"] = [{"required": ["messages"]}, {"required": ["text"]}]
        return schema


def only_deuz_endpoints(endpoints: list[Any], **kwargs: Any) -> list[Any]:
    """drf-spectacular preprocessing hook: leave the project's other DRF views out."""
    return [e for e in endpoints if e[3].cls.__module__.startswith("deuz_django.api")]
