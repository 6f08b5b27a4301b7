"""The standing rules' condition language: data checked when saved, evaluated with plain
comparisons, never raising — a malformed condition is refused naming its clause, and a
value of another kind makes a clause false."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deuz_django.rules.conditions import (
    Clause,
    ConditionError,
    matches,
    parse_condition,
    parse_text,
    to_text,
)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
OPS = st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "not_in"])


def clause(field: str, op: str, value: Any) -> dict[str, Any]:
    return {"field": field, "op": op, "value": value}


def holds(field: str, op: str, value: Any, call_input: Any) -> bool:
    return matches(parse_condition([clause(field, op, value)]), call_input)


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("<=", 50, True),
        ("<=", 19.99, False),
        ("<", 20, False),
        (">", 19, True),
        (">=", 20.0, True),
        ("==", 20, True),
        ("!=", 20, False),
        ("!=", 21, True),
        ("in", [10, 20], True),
        ("not_in", [10, 30], True),
        ("not_in", [20], False),
    ],
)
def test_numbers_compare_as_numbers(op: str, value: Any, expected: bool) -> None:
    assert holds("amount", op, value, {"amount": 20}) is expected


def test_a_dotted_path_reaches_into_objects_and_lists() -> None:
    call = {"customer": {"country": "NO"}, "items": [{"sku": "A"}, {"sku": "B"}]}
    assert holds("customer.country", "in", ["NO", "SE"], call)
    assert holds("items.1.sku", "==", "B", call)
    assert not holds("items.2.sku", "==", "B", call)  # no such item
    assert not holds("customer.city", "==", "Oslo", call)  # no such field


@pytest.mark.parametrize(
    ("op", "value", "found"),
    [
        ("<=", 50, "10"),  # a text where a number is compared
        ("==", 1, True),  # true is not 1
        ("!=", 1, True),  # nor is it "not 1": another kind is never a match
        ("==", "1", 1),
        ("<", "b", 1),
        ("in", [1, 2], "1"),
        ("not_in", [1, 2], "3"),  # a text is not "not in" a list of numbers
        ("==", 5, [5]),  # a list is compared with nothing
        ("!=", 5, {"a": 5}),
        ("==", None, 0),
    ],
)
def test_a_value_of_another_kind_makes_the_clause_false(
    op: str, value: Any, found: Any
) -> None:
    assert holds("x", op, value, {"x": found}) is False


def test_a_missing_field_makes_every_clause_false_even_a_negative_one() -> None:
    for op, value in [("!=", 5), ("not_in", [1]), ("==", None)]:
        assert holds("amount", op, value, {}) is False
        assert holds("amount", op, value, "not an object") is False


def test_all_clauses_must_hold_and_no_clause_covers_every_call() -> None:
    condition = parse_condition(
        [clause("amount", "<=", 50), clause("currency", "==", "USD")]
    )
    assert matches(condition, {"amount": 5, "currency": "USD"})
    assert not matches(condition, {"amount": 5, "currency": "EUR"})
    assert matches(parse_condition([]), {"anything": 1})


@given(condition=st.lists(st.builds(clause, st.text(max_size=10), OPS, JSON)))
def test_evaluating_never_raises_on_any_input(condition: Any) -> None:
    """Any data is either refused when saved, or evaluates against any input."""
    try:
        parsed = parse_condition(condition)
    except ConditionError:
        return
    for call_input in ({"a": 1}, [1, "x"], None, "text", {"": {"": None}}):
        assert matches(parsed, call_input) in (True, False)


@given(field=st.from_regex(r"[a-z_]{1,6}(\.[a-z0-9]{1,4}){0,2}", fullmatch=True))
def test_a_field_from_the_path_grammar_is_accepted(field: str) -> None:
    assert parse_condition([clause(field, "==", 1)])[0].field == field


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("amount <= 50", "A condition is a list of clauses"),
        ([{"field": "amount", "op": "<="}], "Clause 1: a clause is an object"),
        (
            [clause("a", "==", 1), {"field": "b", "op": "==", "value": 1, "x": 2}],
            "Clause 2: a clause is an object with exactly the keys field, op and value"
            " (it has field, op, value, x)",
        ),
        ([clause("", "==", 1)], "Clause 1 ( == 1): field must be a dotted path"),
        ([clause("a..b", "==", 1)], "Clause 1 (a..b == 1): field must be"),
        ([clause(5, "==", 1)], "Clause 1 (5 == 1): field must be"),
        ([clause("a" * 201, "==", 1)], "longer than 200 characters"),
        ([clause("amount", "=<", 1)], "Clause 1 (amount =< 1): op must be one of"),
        ([clause("amount", "in", 5)], "in needs a non-empty list"),
        ([clause("amount", "not_in", [])], "not_in needs a non-empty list"),
        ([clause("amount", "in", [[1]])], "a value is a number, a text"),
        ([clause("amount", "==", {"a": 1})], "a value is a number, a text"),
        ([clause("amount", "<=", True)], "<= compares numbers or texts, not true"),
        ([clause("amount", ">", None)], "> compares numbers or texts, not null"),
        ([clause("amount", "<", float("nan"))], "a number must be finite"),
        ([clause("a", "==", 1)] * 21, "at most 20 clauses"),
    ],
)
def test_a_malformed_condition_is_refused_naming_the_clause(
    data: Any, message: str
) -> None:
    with pytest.raises(ConditionError) as refused:
        parse_condition(data)
    assert message in str(refused.value)


def test_the_text_form_is_parsed_into_the_same_data() -> None:
    data = parse_text(
        'amount <= 50 and customer.country in ["NO", "SE"] AND '
        'status not in ["closed"] and vip == true and note != null'
    )
    assert data == [
        clause("amount", "<=", 50),
        clause("customer.country", "in", ["NO", "SE"]),
        clause("status", "not_in", ["closed"]),
        clause("vip", "==", True),
        clause("note", "!=", None),
    ]
    assert parse_text("amount<=50") == [clause("amount", "<=", 50)]
    assert parse_text("  ") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<= 50", "Clause 1: expected a field name at character 1"),
        ("amount 50", "Clause 1 (amount …): expected an operator"),
        ("amount <= fifty", 'expected a JSON value such as 50, "open"'),
        ("amount <= 'x'", "texts take double quotes"),
        ("amount <= 50 or amount > 70", "expected 'and' or the end at character 14"),
        ("amount <= 50 and", "Clause 2: missing after 'and'"),
        ("amount <= true", "Clause 1 (amount <= true): <= compares numbers or texts"),
        ("amount <= NaN", "a number must be finite"),
        ("amount in 5", "in needs a non-empty list"),
    ],
)
def test_a_malformed_text_is_refused_naming_the_clause(text: str, message: str) -> None:
    with pytest.raises(ConditionError) as refused:
        parse_text(text)
    assert message in str(refused.value)


@given(
    st.lists(
        st.builds(
            clause,
            st.from_regex(r"[a-z][a-z0-9_]{0,5}(\.[0-9]{1,2})?", fullmatch=True),
            st.sampled_from(["==", "!=", "<=", ">"]),
            st.integers(-1000, 1000) | st.text(max_size=5),
        ),
        max_size=4,
    )
)
def test_the_text_form_round_trips(data: list[dict[str, Any]]) -> None:
    clauses = parse_condition(data)
    assert parse_text(to_text(clauses)) == [c.to_json() for c in clauses]


def test_clauses_say_themselves_as_text() -> None:
    clauses = (Clause("amount", "<=", 20), Clause("tag", "not_in", ("a", "ø")))
    assert to_text(clauses) == 'amount <= 20 and tag not in ["a", "ø"]'
