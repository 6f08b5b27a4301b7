"""JavaScript's JSON rules written out from ECMA-262: the oracle the property tests use.

Each function is one abstract operation of the standard, spelled the way the standard
spells it, independently of :mod:`deuz_django.core._jsjson` (which is built for speed on
top of :func:`json.dumps`). ``stringify(value)`` is what ``JSON.stringify`` writes for the
JavaScript value a Python value stands for; ``docs/interop.md`` lists the rules.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

LAST_ARRAY_INDEX = 2**32 - 2
MAX_SAFE_INTEGER = 2**53


def stringify(value: Any, *, exact_ints: bool = True) -> str:
    """``JSON.stringify(value)`` (SerializeJSONProperty), compact.

    With ``exact_ints`` a Python int is written exactly, the deliberate difference of
    ours; without it an int is the double JavaScript would hold (``JSON.parse`` rounds).
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value) if exact_ints else number_to_json(float(value))
    if isinstance(value, float):
        return number_to_json(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(stringify(v, exact_ints=exact_ints) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(
                f"{quote(k)}:{stringify(value[k], exact_ints=exact_ints)}"
                for k in own_property_keys(value)
            )
            + "}"
        )
    raise TypeError(type(value).__name__)


def own_property_keys(obj: dict[str, Any]) -> list[str]:
    """OrdinaryOwnPropertyKeys: array indices ascending, then strings in creation order."""
    indices = sorted((k for k in obj if is_array_index(k)), key=int)
    return indices + [k for k in obj if not is_array_index(k)]


def is_array_index(key: str) -> bool:
    """CanonicalNumericIndexString(key) is an integer in 0 .. 2**32 - 2."""
    if not key or any(c not in "0123456789" for c in key):
        return False
    return str(int(key)) == key and int(key) <= LAST_ARRAY_INDEX


def number_to_json(x: float) -> str:
    """SerializeJSONProperty on a Number: non-finite is ``null``, else Number::toString."""
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"  # +0 and -0 alike
    if x < 0:
        return "-" + number_to_json(-x)
    # The shortest digits s (k of them) with x == s × 10**(n - k): Python's repr is the
    # shortest round-trip text too, and it picks the closest digits, as V8 does.
    _, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    assert isinstance(exponent, int)  # finite
    s = "".join(map(str, digits))
    k = len(s)
    n = exponent + k
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + s
    e = n - 1
    exponent_text = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return s + "e" + exponent_text
    return s[0] + "." + s[1:] + "e" + exponent_text


def quote(text: str) -> str:
    """QuoteJSONString over the UTF-16 code units JavaScript's string would hold."""
    units = text.encode("utf-16-le", "surrogatepass")
    codes = [
        int.from_bytes(units[i : i + 2], "little") for i in range(0, len(units), 2)
    ]
    out = ['"']
    i = 0
    while i < len(codes):
        c = codes[i]
        if (
            0xD800 <= c <= 0xDBFF
            and i + 1 < len(codes)
            and 0xDC00 <= codes[i + 1] <= 0xDFFF
        ):
            out.append(chr(0x10000 + ((c - 0xD800) << 10) + (codes[i + 1] - 0xDC00)))
            i += 2
            continue
        if c in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[c])
        elif c < 0x20 or 0xD800 <= c <= 0xDFFF:  # control character, lone surrogate
            out.append(f"\\u{c:04x}")
        else:
            out.append(chr(c))
        i += 1
    out.append('"')
    return "".join(out)


_SHORT_ESCAPES = {
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}


def parse_number(text: str) -> float:
    """What ``JSON.parse`` holds for a number's text: the nearest double."""
    return float(text)


# -- hypothesis strategies: the values where Python and JavaScript part -----------

# Integer-like keys (and near misses) mixed with ordinary ones, so orders get shuffled.
keys = st.one_of(
    st.text(max_size=6),
    st.integers(0, 2**32 + 2).map(str),
    st.sampled_from(["0", "00", "01", "-1", "1.5", "1e3", "4294967294", "4294967295"]),
    st.sampled_from(["\u0663", "\u00b2", "10\u0660"]),  # non-ASCII digits: not indices
)
# Any code point, lone surrogates included (hypothesis leaves them out by default).
characters = st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr))
strings = st.text(characters, max_size=8)
floats = st.one_of(
    st.floats(),
    st.sampled_from(
        [1.0, 0.1, 1e21, 1e-7, -0.0, 1e16, 1e-6, 123456789012345680000.0, 5e-324]
    ),
)
ints = st.one_of(
    st.integers(-(2**53), 2**53), st.integers(-(2**70), 2**70), st.just(2**53 + 1)
)
scalars = st.none() | st.booleans() | ints | floats | strings
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5)
    ),
    max_leaves=16,
)
finite_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.0, 0.1, 1e21, 1e-7, -0.0, 1e16]),
)
