"""Messages and their parts: immutable values with Deuz's JSON form (SPEC R1.1, R1.2).

Python attributes are snake_case; ``to_json()`` gives the camelCase JSON form the TypeScript
SDK reads and writes, and ``from_json()`` validates a plain dict with an error that names the
bad field (``messages[1].content[0].toolUseId: expected a string``). Absent optional fields
are ``None`` in Python and absent keys in JSON. Byte strings stay ``bytes`` in the JSON form;
the checkpoint codec tags them for storage.

A message or part read with ``from_json`` writes back the object it was read from: keys
this runtime does not know, ``null`` optionals and a missing ``input`` or ``result`` pass
through as the reference passes them (see :mod:`deuz_django.core._kept`). Only what would
make a run wrong is refused: an unknown role or part type, a known field of the wrong type.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeGuard, get_args

from ._kept import keep
from .exceptions import InvalidInputError

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(get_args(Role))


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    type: ClassVar[str] = "text"
    _json: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def to_json(self) -> dict[str, Any]:
        if self._json is not None:
            return dict(self._json)
        return {"type": "text", "text": self.text}


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image as raw bytes, base64 text, a data URL or an http URL."""

    image: str | bytes
    media_type: str | None = None
    type: ClassVar[str] = "image"
    _json: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def to_json(self) -> dict[str, Any]:
        if self._json is not None:
            return dict(self._json)
        out: dict[str, Any] = {"type": "image", "image": self.image}
        if self.media_type is not None:
            out["mediaType"] = self.media_type
        return out


@dataclass(frozen=True, slots=True)
class ToolUsePart:
    """A tool call the model made; ``provider_metadata`` is opaque round-trip data."""

    id: str
    name: str
    input: Any
    provider_metadata: dict[str, Any] | None = None
    type: ClassVar[str] = "tool_use"
    _json: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def to_json(self) -> dict[str, Any]:
        if self._json is not None:
            return dict(self._json)
        out: dict[str, Any] = {
            "type": "tool_use",
            "id": self.id,
            "name": self.name,
            "input": self.input,
        }
        if self.provider_metadata is not None:
            out["providerMetadata"] = self.provider_metadata
        return out


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    """The answer to one tool call; ``is_error`` is absent (None) on success."""

    tool_use_id: str
    result: Any
    is_error: bool | None = None
    type: ClassVar[str] = "tool_result"
    _json: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def to_json(self) -> dict[str, Any]:
        if self._json is not None:
            return dict(self._json)
        out: dict[str, Any] = {
            "type": "tool_result",
            "toolUseId": self.tool_use_id,
            "result": self.result,
        }
        if self.is_error is not None:
            out["isError"] = self.is_error
        return out


@dataclass(frozen=True, slots=True)
class ReasoningPart:
    """Model reasoning, carried through the loop unchanged (signatures must round-trip).

    The JSON form writes ``encrypted`` before ``signature``, as the reference builds the
    part of an encrypted payload (R1.3).
    """

    text: str
    signature: str | None = None
    encrypted: bool | None = None
    redacted: bool | None = None
    type: ClassVar[str] = "reasoning"
    _json: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def to_json(self) -> dict[str, Any]:
        if self._json is not None:
            return dict(self._json)
        out: dict[str, Any] = {"type": "reasoning", "text": self.text}
        if self.encrypted is not None:
            out["encrypted"] = self.encrypted
        if self.signature is not None:
            out["signature"] = self.signature
        if self.redacted is not None:
            out["redacted"] = self.redacted
        return out


Part = TextPart | ImagePart | ToolUsePart | ToolResultPart | ReasoningPart


@dataclass(frozen=True, slots=True)
class Message:
    """One turn of history. ``content`` is a string or a tuple of parts."""

    role: Role
    content: str | tuple[Part, ...]
    provider_metadata: dict[str, Any] | None = None
    _json: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def to_json(self) -> dict[str, Any]:
        content: Any = (
            self.content
            if isinstance(self.content, str)
            else [part.to_json() for part in self.content]
        )
        if self._json is not None:
            return {**self._json, "content": content}
        out: dict[str, Any] = {"role": self.role, "content": content}
        if self.provider_metadata is not None:
            out["providerMetadata"] = self.provider_metadata
        return out

    @classmethod
    def from_json(cls, data: Any, *, path: str = "message") -> Message:
        return message_from_json(data, path=path)

    @property
    def parts(self) -> tuple[Part, ...]:
        """The content as parts: a string content reads as one text part."""
        if isinstance(self.content, str):
            return (TextPart(self.content),) if self.content else ()
        return self.content

    @property
    def text(self) -> str:
        """All text parts joined, the way a reader of the transcript sees the turn."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


# -- validation of plain JSON input -----------------------------------------------------


def _is_role(value: object) -> TypeGuard[Role]:
    return isinstance(value, str) and value in ROLES


def _fail(path: str, problem: str) -> InvalidInputError:
    return InvalidInputError(f"{path}: {problem}")


def _str(data: dict[str, Any], key: str, path: str, *, optional: bool = False) -> Any:
    if key not in data or (optional and data[key] is None):
        if optional:
            return None
        raise _fail(f"{path}.{key}", "is required")
    value = data[key]
    if not isinstance(value, str):
        raise _fail(f"{path}.{key}", f"expected a string, got {type(value).__name__}")
    return value


def _bool(data: dict[str, Any], key: str, path: str) -> bool | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise _fail(f"{path}.{key}", f"expected a boolean, got {type(value).__name__}")
    return value


def _dict(data: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _fail(f"{path}.{key}", f"expected an object, got {type(value).__name__}")
    return value


def part_from_json(data: Any, *, path: str = "part") -> Part:
    if isinstance(
        data, TextPart | ImagePart | ToolUsePart | ToolResultPart | ReasoningPart
    ):
        return data
    if not isinstance(data, dict):
        raise _fail(path, f"expected an object, got {type(data).__name__}")
    return keep(_part(data, path), dict(data))


def _part(data: dict[str, Any], path: str) -> Part:
    kind = data.get("type")
    if kind == "text":
        return TextPart(_str(data, "text", path))
    if kind == "image":
        image = data.get("image")
        if not isinstance(image, str | bytes | bytearray | memoryview):
            raise _fail(
                f"{path}.image", "expected bytes or a string (base64, data or http URL)"
            )
        if not isinstance(image, str):
            image = bytes(image)
        return ImagePart(image, _str(data, "mediaType", path, optional=True))
    if kind == "tool_use":  # a missing input reads as None and stays missing
        return ToolUsePart(
            _str(data, "id", path),
            _str(data, "name", path),
            data.get("input"),
            _dict(data, "providerMetadata", path),
        )
    if kind == "tool_result":
        return ToolResultPart(
            _str(data, "toolUseId", path),
            data.get("result"),
            _bool(data, "isError", path),
        )
    if kind == "reasoning":
        return ReasoningPart(
            _str(data, "text", path),
            _str(data, "signature", path, optional=True),
            _bool(data, "encrypted", path),
            _bool(data, "redacted", path),
        )
    raise _fail(
        f"{path}.type",
        f"unknown part type {kind!r} (expected text, image, tool_use, tool_result or reasoning)",
    )


def message_from_json(data: Any, *, path: str = "message") -> Message:
    if isinstance(data, Message):
        return data
    if not isinstance(data, dict):
        raise _fail(
            path, f"expected an object with role and content, got {type(data).__name__}"
        )
    role = data.get("role")
    if not _is_role(role):
        raise _fail(
            f"{path}.role", f"expected system, user, assistant or tool, got {role!r}"
        )
    if "content" not in data:
        raise _fail(f"{path}.content", "is required")
    raw = data["content"]
    content: str | tuple[Part, ...]
    if isinstance(raw, str):
        content = raw
    elif isinstance(raw, list | tuple):
        content = tuple(
            part_from_json(item, path=f"{path}.content[{i}]")
            for i, item in enumerate(raw)
        )
    else:
        raise _fail(
            f"{path}.content",
            f"expected a string or a list of parts, got {type(raw).__name__}",
        )
    return keep(
        Message(role, content, _dict(data, "providerMetadata", path)), dict(data)
    )


def coerce_messages(
    messages: Iterable[Message | dict[str, Any]],
) -> tuple[Message, ...]:
    """Validate caller-supplied history into a tuple of :class:`Message` values."""
    if isinstance(messages, str | bytes | dict):
        raise InvalidInputError("messages: expected a list of messages")
    return tuple(
        message_from_json(item, path=f"messages[{i}]")
        for i, item in enumerate(messages)
    )
