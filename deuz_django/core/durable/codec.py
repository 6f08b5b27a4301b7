"""The checkpoint codec: JSON text for persistent stores, byte strings included (SPEC §8).

JSON has no byte strings, so every ``bytes`` (or ``bytearray``/``memoryview``) anywhere in
the tree is written as ``{"$deuzBytes": "<standard base64 with padding>"}`` and read back
as ``bytes``. The text is the reference's, byte for byte, so a store can be shared with the
TypeScript runtime::

    >>> encode_json({"image": b"\\x01\\x02", "n": 1.0})
    '{"image":{"$deuzBytes":"AQI="},"n":1}'
    >>> decode_json('{"image":{"$deuzBytes":"AQI="},"n":1}')
    {'image': b'\\x01\\x02', 'n': 1}

The tag is a reserved key: user data that is exactly ``{"$deuzBytes": <valid base64>}``
comes back as bytes (R8.3).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from .. import _jsjson
from ..exceptions import InvalidInputError
from .checkpoint import AgentCheckpoint

_TAG = "$deuzBytes"
_ASCII_WHITESPACE = str.maketrans("", "", "\t\n\f\r ")
_STANDARD_ALPHABET = re.compile(r"[A-Za-z0-9+/]*")


def encode_json(value: Any) -> str:
    """Compact JSON with JS number formatting and every byte string tagged (R8.1)."""
    return _jsjson.dumps(value, default=_tag_bytes)


def decode_json(text: str) -> Any:
    """Parse JSON, turning each valid ``$deuzBytes`` tag back into ``bytes`` (R8.2).

    Tags convert bottom-up, so a tag at the top level or inside a list converts too; a
    look-alike that is not exactly one key holding valid base64 text stays a plain dict.
    Raises :class:`ValueError` when the text is not JSON.
    """
    return _jsjson.loads(text, object_hook=_untag)


def serialize_checkpoint(checkpoint: AgentCheckpoint) -> str:
    """The stored form of a checkpoint (R8.1)."""
    return encode_json(checkpoint.to_json())


def deserialize_checkpoint(text: str | bytes) -> AgentCheckpoint:
    """Read a stored checkpoint back; bytes are read as UTF-8.

    Raises :class:`InvalidInputError` (a ``ValueError``) when the text is not JSON, is not
    an object, has an unknown ``version`` or a field of the wrong type.
    """
    try:
        data = decode_json(text.decode("utf-8") if isinstance(text, bytes) else text)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        raise InvalidInputError(f"checkpoint: not valid JSON ({exc})") from exc
    return AgentCheckpoint.from_json(data)


def _tag_bytes(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return {_TAG: base64.b64encode(value).decode("ascii")}
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _untag(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and isinstance(encoded := obj.get(_TAG), str):
        decoded = _forgiving_base64_decode(encoded)
        if decoded is not None:
            return decoded
    return obj


def _forgiving_base64_decode(text: str) -> bytes | None:
    """The browser's ``atob`` rules (WHATWG forgiving-base64); ``None`` when it would throw.

    Python's ``base64.b64decode`` silently drops characters outside the alphabet, so the
    checks are explicit (SPEC R8.2, R8.4).
    """
    data = text.translate(_ASCII_WHITESPACE)
    if len(data) % 4 == 0 and data.endswith("="):
        data = data[:-2] if data.endswith("==") else data[:-1]
    if len(data) % 4 == 1 or not _STANDARD_ALPHABET.fullmatch(data):
        return None
    # Left-over bits in the last character are ignored, as atob ignores them.
    return binascii.a2b_base64(data + "=" * (-len(data) % 4))
