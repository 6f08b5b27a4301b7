"""JSON text as JavaScript's ``JSON.stringify`` and ``JSON.parse`` handle it.

Signed tokens must be byte-identical to the reference's (SPEC R10.4) and checkpoints and
wire parts must read and write the same in Node (R8.1, R8.6), so this module mirrors the
three places where JavaScript differs from :func:`json.dumps` (``docs/interop.md``):

- Key order: an object's integer-like keys (array indices, ``"0"`` to ``"4294967294"`` in
  canonical form) come first in ascending order, then the other keys in insertion order:
  ``{"b": 1, "2": 0}`` is written ``{"2":0,"b":1}``.
- Numbers follow ``Number::toString``: ``1.0`` is ``1``, ``-0.0`` is ``0``, ``1e-7`` stays
  ``1e-7`` (Python writes ``1e-07``), ``1e16`` is ``10000000000000000``, ``1e21`` is
  ``1e+21`` and a non-finite number is ``null``. Python ints are written exactly (a
  deliberate difference: JavaScript would round one beyond 2**53 to a double).
- Strings are UTF-16 to JavaScript: a surrogate pair is one character, written raw; a lone
  surrogate is escaped (``"\\ud800"``), as the well-formed ``JSON.stringify`` does, so the
  text always encodes to UTF-8.

Everything else is :func:`json.dumps` in compact form with non-ASCII characters kept raw.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

# One encoder for every call: ``json.dumps`` with options builds a new one each time.
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# A high surrogate followed by a low one is a pair (one character to JavaScript); any
# other surrogate is lone.
_SURROGATE = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")
_ANY_SURROGATE = re.compile("[\ud800-\udfff]")  # the cheap test, as surrogates are rare
_LAST_INDEX = 2**32 - 2


def dumps(value: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """Compact JSON text; ``default`` converts what JSON cannot hold, as in ``json.dumps``.

    Tuples are written as lists. The tree is walked once to rewrite floats; the text itself
    comes from ``json.dumps`` unless a float needs digits Python cannot produce. A flat
    object of strings (most stream parts: a text delta) has no number to rewrite and skips
    the walk. Integer-like keys are moved to the front (cheap to rule out: ``isdigit``).
    """
    if _is_flat_strings(value):
        text = _compact(value)
    else:
        walker = _Walker(default)
        tree = walker.walk(value)
        text = _encode_with_raw(tree) if walker.has_raw else _compact(tree)
    if text.isascii() or not _ANY_SURROGATE.search(text):
        return text
    return _SURROGATE.sub(_escape_surrogate, text)


def loads(
    text: str, *, object_hook: Callable[[dict[str, Any]], Any] | None = None
) -> Any:
    """Parse JSON like ``JSON.parse``: ``NaN`` and ``Infinity`` are not JSON."""
    return json.loads(text, object_hook=object_hook, parse_constant=_reject_constant)


def _is_flat_strings(value: Any) -> bool:
    """A dict of string values under non-numeric string keys: ``json.dumps`` alone writes it.

    A plain loop: the hot path (a text delta per streamed token) is faster than ``all()``.
    """
    if type(value) is not dict:
        return False
    for k, v in value.items():
        if type(k) is not str or type(v) is not str or k.isdigit():
            return False
    return True


def _escape_surrogate(match: re.Match[str]) -> str:
    found = match[0]
    if len(found) == 2:  # a pair: the astral character JavaScript's string holds
        high, low = map(ord, found)
        return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    return f"\\u{ord(found):04x}"


def is_array_index(key: str) -> bool:
    """Whether JavaScript orders ``key`` first: the canonical text of 0 .. 2**32 - 2."""
    return (
        key.isascii()
        and key.isdigit()
        and (key == "0" or key[0] != "0")
        and (len(key) < 10 or int(key) <= _LAST_INDEX)
    )


def _js_key_order(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with its array-index keys first, ascending, then the rest as inserted."""
    indices = sorted((k for k in obj if is_array_index(k)), key=int)
    if not indices:
        return obj
    out = {k: obj[k] for k in indices}
    out.update((k, v) for k, v in obj.items() if k not in out)
    return out


def as_integer(value: object) -> int | None:
    """``value`` as an int when JavaScript would hold an integer there, else ``None``.

    JavaScript has no int type: ``1e21`` and ``1.0`` are integers to it. A bool is not.
    """
    if type(value) is int:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class _RawNumber:
    """Number text ``json.dumps`` cannot write (it would print ``1e-05`` or ``1e+16``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Walker:
    """Copies a value into JSON-ready form: JS numbers, string keys, lists for tuples."""

    __slots__ = ("default", "has_raw")

    def __init__(self, default: Callable[[Any], Any] | None) -> None:
        self.default = default
        self.has_raw = False

    def walk(self, o: Any) -> Any:
        kind = type(o)
        if kind is str or kind is int or kind is bool or o is None:
            return o
        if kind is float:
            return self._number(o)
        if isinstance(o, dict):
            out = {
                k if type(k) is str else self._key(k): self.walk(v)
                for k, v in o.items()
            }
            return _js_key_order(out) if any(map(str.isdigit, out)) else out
        if isinstance(o, list | tuple):
            return [self.walk(v) for v in o]
        if isinstance(o, str | int):  # subclasses such as enums: json.dumps writes them
            return o
        if isinstance(o, float):
            return self._number(float(o))
        if self.default is None:
            raise TypeError(f"Object of type {kind.__name__} is not JSON serializable")
        return self.walk(self.default(o))

    def _number(self, x: float) -> Any:
        if not math.isfinite(x):
            return None
        if (
            x.is_integer() and abs(x) < 1e16
        ):  # exact below 1e16, so int() has JS's digits
            return int(x)
        text = js_number(x)
        if text == repr(x):
            return x
        self.has_raw = True
        return _RawNumber(text)

    @staticmethod
    def _key(k: Any) -> str:
        if isinstance(k, str):
            return k
        if isinstance(k, bool) or k is None:
            return _compact(k)
        if isinstance(k, int):
            return int.__repr__(k)
        if isinstance(k, float):
            return js_number(k) if math.isfinite(k) else _compact(k)
        raise TypeError(
            f"keys must be str, int, float, bool or None, not {type(k).__name__}"
        )


def js_number(x: float) -> str:
    """ECMAScript ``Number::toString`` of a finite float, built on Python's shortest repr."""
    if x == 0:
        return "0"
    mantissa, _, exponent = repr(abs(x)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    digits = all_digits.lstrip("0")
    # x == 0.<digits> × 10**point, the ``n`` of the ECMAScript algorithm.
    point = len(whole) - (len(all_digits) - len(digits)) + int(exponent or 0)
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= point <= 21:
        text = digits + "0" * (point - k)
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        e = point - 1
        fraction_part = f".{digits[1:]}" if k > 1 else ""
        text = f"{digits[0]}{fraction_part}e{'+' if e >= 0 else '-'}{abs(e)}"
    return f"-{text}" if x < 0 else text


def _encode_with_raw(o: Any) -> str:
    """The slow path for trees holding a :class:`_RawNumber` (keys are already strings)."""
    if isinstance(o, _RawNumber):
        return o.text
    if isinstance(o, dict):
        items = ",".join(f"{_compact(k)}:{_encode_with_raw(v)}" for k, v in o.items())
        return "{" + items + "}"
    if isinstance(o, list):
        return "[" + ",".join(_encode_with_raw(v) for v in o) + "]"
    return _compact(o)
