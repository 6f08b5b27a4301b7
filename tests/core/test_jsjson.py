"""The shared JS-JSON encoder against JavaScript's rules (docs/interop.md, SPEC R8.1, R10.4).

Every JSON text Deuz writes (signed payloads, checkpoints, wire parts) goes through
``_jsjson.dumps``; these tests pin it against :mod:`tests.core.jsrules`, an independent
transcription of ``JSON.stringify`` from ECMA-262. Each example names the rule it shows.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deuz_django.core import _jsjson

from . import jsrules
from .jsrules import ints, json_values, keys


def js_parse(value: Any) -> Any:
    """The value ``JSON.parse(JSON.stringify(value))`` holds, in Python terms."""
    return json.loads(jsrules.stringify(value))


# -- the rules, property by property -------------------------------------------------


@given(json_values)
def test_dumps_writes_what_json_stringify_writes(value: Any) -> None:
    # Every rule at once: key order, numbers, strings; ints exact (our difference).
    assert _jsjson.dumps(value) == jsrules.stringify(value)


@given(json_values)
def test_text_read_and_written_again_is_unchanged(value: Any) -> None:
    # R8.6 in the small: JSON.stringify(JSON.parse(s)) == s for any s it wrote.
    text = _jsjson.dumps(value)
    assert _jsjson.dumps(_jsjson.loads(text)) == text


@given(json_values)
def test_a_value_reads_back_as_javascript_reads_it(value: Any) -> None:
    text = _jsjson.dumps(value)
    assert _jsjson.loads(text) == js_parse(value)


@given(st.dictionaries(keys, st.integers(0, 9), max_size=8), st.randoms())
def test_key_order_depends_only_on_insertion_order_of_non_index_keys(
    obj: dict[str, int], random: Any
) -> None:
    # Rule 1: shuffling the integer-like keys changes nothing; they sort ascending.
    items = list(obj.items())
    index_items = [kv for kv in items if jsrules.is_array_index(kv[0])]
    others = [kv for kv in items if not jsrules.is_array_index(kv[0])]
    random.shuffle(index_items)
    shuffled = (
        dict(index_items + others)
        if random.random() < 0.5
        else dict(others + index_items)
    )
    assert _jsjson.dumps(shuffled) == _jsjson.dumps(obj)
    written = list(json.loads(_jsjson.dumps(obj)))
    assert written == sorted((k for k, _ in index_items), key=int) + [
        k for k, _ in others
    ]


@given(ints)
def test_an_int_is_written_exactly_and_javascript_reads_the_nearest_double(
    n: int,
) -> None:
    # Rule 3 (our decision): Python's exact int; JSON.parse gives the nearest double,
    # the very double the reference would have written.
    text = _jsjson.dumps(n)
    assert text == str(n)
    assert jsrules.parse_number(text) == float(n)
    assert _jsjson.dumps(float(n)) == jsrules.stringify(n, exact_ints=False)


# -- rule 1: key order ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "js"),
    [
        # array indices first, ascending; then the other keys as inserted
        ({"b": 1, "2": 0}, '{"2":0,"b":1}'),
        ({"b": 1, "10": 0, "9": 0, "a": 2}, '{"9":0,"10":0,"b":1,"a":2}'),
        # not canonical, negative, fractional or beyond 2**32 - 2: insertion order
        ({"b": 0, "01": 0, "-1": 0, "1.5": 0}, '{"b":0,"01":0,"-1":0,"1.5":0}'),
        (
            {"x": 0, "4294967295": 0, "4294967294": 0},
            '{"4294967294":0,"x":0,"4294967295":0}',
        ),
        # non-ASCII digits are strings, not indices
        ({"x": 0, "\u0663": 0, "3": 0}, '{"3":0,"x":0,"\u0663":0}'),
        # a flat object of strings takes the fast path, and is ordered too
        ({"type": "t", "7": "x"}, '{"7":"x","type":"t"}'),
        # at every depth, inside lists too
        ({"a": [{"1": 0, "0": 0}]}, '{"a":[{"0":0,"1":0}]}'),
        # Python keys that JavaScript would see as property names
        ({2: "a", "b": 1, -0.0: 2, 1.0: 3}, '{"0":2,"1":3,"2":"a","b":1}'),
    ],
)
def test_integer_like_keys_come_first(value: Any, js: str) -> None:
    assert _jsjson.dumps(value) == js


# -- rule 3: numbers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "js"),
    [
        (1.0, "1"),  # an integral double has no fraction
        (0.1, "0.1"),  # shortest round-trip digits
        (1e21, "1e+21"),  # 21 digits and more: exponent with sign
        (1e20, "100000000000000000000"),  # fewer: plain digits
        (1e-7, "1e-7"),  # below 1e-6: exponent, no zero padding (Python: 1e-07)
        (1e-6, "0.000001"),
        (-0.0, "0"),  # minus zero is written 0
        (math.nan, "null"),  # non-finite is null
        (2.0**53 + 2, "9007199254740994"),
    ],
)
def test_numbers_follow_number_to_string(number: float, js: str) -> None:
    assert _jsjson.dumps(number) == js == jsrules.number_to_json(number)


def test_big_ints_stay_exact_where_javascript_would_round() -> None:
    # Rule 3: a deliberate difference, listed in docs/interop.md.
    assert _jsjson.dumps(2**64 + 1) == "18446744073709551617"
    assert jsrules.stringify(2**64 + 1, exact_ints=False) == "18446744073709552000"
    # What the reference wrote reads back and writes again unchanged.
    for text in ("18446744073709552000", "1.8446744073709552e+21"):
        assert _jsjson.dumps(_jsjson.loads(text)) == text


# -- rule 5: strings -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "js"),
    [
        ("\U0001f680", '"\U0001f680"'),  # an astral character: raw UTF-8
        ("\ud83d\ude80", '"\U0001f680"'),  # the same as a surrogate pair: one character
        ("\ud800", '"\\ud800"'),  # a lone high surrogate: escaped, lowercase hex
        ("a\udfffb", '"a\\udfffb"'),  # a lone low surrogate
        ("\udc00\ud800", '"\\udc00\\ud800"'),  # low before high is no pair
        ("\u2028\x7f", '"\u2028\x7f"'),  # not escaped by JSON.stringify
        ("\x00\x1f\b\t", '"\\u0000\\u001f\\b\\t"'),  # control characters
    ],
)
def test_strings_are_quoted_as_utf16_code_units(text: str, js: str) -> None:
    assert _jsjson.dumps(text) == js == jsrules.quote(text)
    # the text is always valid UTF-8, and reads back as JavaScript holds the string
    _jsjson.dumps(text).encode("utf-8")
    assert _jsjson.loads(js).encode("utf-16-le", "surrogatepass") == text.encode(
        "utf-16-le", "surrogatepass"
    )
