"""Content both adapters send the same way: images and tool results."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from ..exceptions import InvalidInputError
from ..messages import ImagePart

_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


@dataclass(frozen=True, slots=True)
class ResolvedImage:
    """An image as the wire wants it: an http URL, or base64 data with its media type."""

    url: str | None = None
    media_type: str = ""
    data: str = ""

    @property
    def data_url(self) -> str:
        return self.url or f"data:{self.media_type};base64,{self.data}"


def resolve_image(part: ImagePart) -> ResolvedImage:
    """Bytes are base64-encoded; base64 text and data URLs are split; http URLs pass."""
    image = part.image
    if isinstance(image, bytes):
        media_type = part.media_type or _sniff(image)
        return ResolvedImage(None, media_type, base64.b64encode(image).decode("ascii"))
    if image.startswith(("http://", "https://")):
        return ResolvedImage(image)
    if image.startswith("data:"):
        header, _, data = image.partition(",")
        media_type = header[5:].split(";", 1)[0]
        if not header.endswith(";base64") or not media_type:
            raise InvalidInputError("image: expected a base64 data URL")
        return ResolvedImage(None, media_type, data)
    if part.media_type:
        return ResolvedImage(None, part.media_type, image)
    try:
        head = base64.b64decode(image[:64] + "=" * (-len(image[:64]) % 4))
    except ValueError as exc:
        raise InvalidInputError(
            "image: expected base64 text, a data URL or a URL"
        ) from exc
    return ResolvedImage(None, _sniff(head), image)


def _sniff(head: bytes) -> str:
    for signature, media_type in _SIGNATURES:
        if head.startswith(signature):
            return media_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    raise InvalidInputError("image: unknown image format; pass media_type")


def as_text(value: Any) -> str:
    """A tool result or tool-call input as text: strings as-is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), default=_json_default
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    return str(value)
