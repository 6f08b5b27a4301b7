"""Standing-rule conditions: data that says which calls a rule covers, never code.

A condition is a JSON list of clauses, all of which must hold for the call's input::

    [{"field": "amount", "op": "<=", "value": 50},
     {"field": "customer.country", "op": "in", "value": ["NO", "SE"]}]

``field`` is a dotted path into the input (a number indexes a list: ``items.0.sku``);
``op`` one of ``==  !=  <  <=  >  >=  in  not_in``; ``value`` a JSON value — a list of
them for ``in`` and ``not_in``, a number or a text for the ordering operators. The admin
also takes the compact text form, parsed into the same data by :func:`parse_text`::

    amount <= 50 and customer.country in ["NO", "SE"]

Clauses are checked when a rule is saved (:func:`parse_condition` raises
:class:`ConditionError` naming the clause) and evaluated with plain comparisons, never
``eval``. A field the input lacks, or a value of another kind (a text against a number,
``true`` against ``1``), makes the clause false — evaluating never raises.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

MAX_CLAUSES = 20
MAX_FIELD_LENGTH = 200
SEGMENT = r"[A-Za-z0-9_-]+"
FIELD_PATTERN = re.compile(rf"{SEGMENT}(?:\.{SEGMENT})*")
ORDERING = ("<", "<=", ">", ">=")
MEMBERSHIP = ("in", "not_in")
OPS = ("==", "!=", *ORDERING, *MEMBERSHIP)
# The text form's operators, longest first so that "<=" is never read as "<".
_TEXT_OP = re.compile(r"==|!=|<=|>=|<|>|not[ \t]+in\b|not_in\b|in\b")
_AND = re.compile(r"and\b", re.IGNORECASE)
_FIELD_AT = re.compile(FIELD_PATTERN.pattern)
_MISSING = object()


class ConditionError(ValueError):
    """A malformed condition; the message names the clause (``Clause 2 (…): …``)."""


def _kind(value: Any) -> str | None:
    """What comparisons a JSON value takes part in (``None``: a list or an object)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def _same(left: Any, right: Any) -> bool | None:
    """``left == right`` between values of one kind; ``None`` when the kinds differ."""
    if _kind(left) != _kind(right):
        return None
    return bool(left == right)


def _ordered(compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def holds(found: Any, value: Any) -> bool:
        return _kind(found) == _kind(value) and compare(found, value)

    return holds


def _equal(found: Any, value: Any) -> bool:
    return _same(found, value) is True


def _unequal(found: Any, value: Any) -> bool:
    return _same(found, value) is False


def _member(found: Any, values: tuple[Any, ...]) -> bool:
    return any(_same(found, item) for item in values)


def _not_member(found: Any, values: tuple[Any, ...]) -> bool:
    """Of a kind the list holds, and none of its values (another kind: false)."""
    verdicts = [_same(found, item) for item in values]
    return False in verdicts and True not in verdicts


_HOLDS: dict[str, Callable[[Any, Any], bool]] = {
    "==": _equal,
    "!=": _unequal,
    "<": _ordered(lambda a, b: a < b),
    "<=": _ordered(lambda a, b: a <= b),
    ">": _ordered(lambda a, b: a > b),
    ">=": _ordered(lambda a, b: a >= b),
    "in": _member,
    "not_in": _not_member,
}


@dataclass(frozen=True, slots=True)
class Clause:
    """One checked clause: ``field`` (a dotted path), ``op`` and ``value`` (a tuple for
    ``in``/``not_in``)."""

    field: str
    op: str
    value: Any

    def holds(self, call_input: Any) -> bool:
        found = _lookup(call_input, self.field.split("."))
        if found is _MISSING or _kind(found) is None:
            return False
        return _HOLDS[self.op](found, self.value)

    def to_json(self) -> dict[str, Any]:
        value = list(self.value) if self.op in MEMBERSHIP else self.value
        return {"field": self.field, "op": self.op, "value": value}

    def to_text(self) -> str:
        op = "not in" if self.op == "not_in" else self.op
        value = list(self.value) if self.op in MEMBERSHIP else self.value
        return f"{self.field} {op} {json.dumps(value, ensure_ascii=False)}"


def _lookup(value: Any, path: Sequence[str]) -> Any:
    for segment in path:
        if isinstance(value, dict) and segment in value:
            value = value[segment]
        elif (
            isinstance(value, list)
            and segment.isdecimal()
            and int(segment) < len(value)
        ):
            value = value[int(segment)]
        else:
            return _MISSING
    return value


def matches(clauses: Sequence[Clause], call_input: Any) -> bool:
    """Whether every clause holds for ``call_input`` (no clauses: every call)."""
    return all(clause.holds(call_input) for clause in clauses)


def parse_condition(data: Any) -> tuple[Clause, ...]:
    """The clauses of a stored condition, or :class:`ConditionError` naming the first
    bad one."""
    if not isinstance(data, list):
        raise ConditionError(
            "A condition is a list of clauses, such as "
            '[{"field": "amount", "op": "<=", "value": 50}].'
        )
    if len(data) > MAX_CLAUSES:
        raise ConditionError(f"A condition has at most {MAX_CLAUSES} clauses.")
    return tuple(_clause(number, item) for number, item in enumerate(data, start=1))


def _clause(number: int, item: Any) -> Clause:
    if not isinstance(item, dict) or set(item) != {"field", "op", "value"}:
        keys = sorted(item) if isinstance(item, dict) else None
        got = f" (it has {', '.join(map(str, keys)) or 'none'})" if keys else ""
        raise ConditionError(
            f"Clause {number}: a clause is an object with exactly the keys field, op "
            f"and value{got}."
        )
    field, op, value = item["field"], item["op"], item["value"]
    shown = _shown(field, op, value)

    def refuse(problem: str) -> ConditionError:
        return ConditionError(f"Clause {number} ({shown}): {problem}")

    if not isinstance(field, str) or not FIELD_PATTERN.fullmatch(field):
        raise refuse(
            "field must be a dotted path of letters, digits, '_' and '-' "
            "(such as amount or customer.country)."
        )
    if len(field) > MAX_FIELD_LENGTH:
        raise refuse(f"field is longer than {MAX_FIELD_LENGTH} characters.")
    if op not in OPS:
        raise refuse(f"op must be one of {', '.join(OPS)}.")
    if op in MEMBERSHIP:
        if not isinstance(value, list) or not value:
            raise refuse(f"{op} needs a non-empty list of values, such as [1, 2].")
        for element in value:
            _check_scalar(element, refuse)
        return Clause(field, op, tuple(value))
    _check_scalar(value, refuse)
    if op in ORDERING and _kind(value) not in ("number", "string"):
        raise refuse(f"{op} compares numbers or texts, not {json.dumps(value)}.")
    return Clause(field, op, value)


def _check_scalar(value: Any, refuse: Callable[[str], ConditionError]) -> None:
    if _kind(value) is None:
        raise refuse("a value is a number, a text, true, false or null.")
    if isinstance(value, float) and not math.isfinite(value):
        raise refuse("a number must be finite.")


def _shown(field: Any, op: Any, value: Any) -> str:
    """A clause as written, for an error message (whatever its parts are)."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return f"{field} {op} {text}"[:120]


def to_text(clauses: Sequence[Clause]) -> str:
    """The compact text form (``amount <= 50 and status == "open"``)."""
    return " and ".join(clause.to_text() for clause in clauses)


def parse_text(text: str) -> list[dict[str, Any]]:
    """The condition data the compact text form stands for (checked like stored data).

    ``field op value`` clauses joined by ``and``; a value is a JSON literal (``50``,
    ``"open"``, ``true``, ``null``, ``["NO", "SE"]``); ``not in`` is ``not_in``. An empty
    text is the empty condition (every call).
    """
    decoder = json.JSONDecoder()
    data: list[dict[str, Any]] = []
    position = _skip(text, 0)
    while position < len(text):
        number = len(data) + 1
        found = _FIELD_AT.match(text, position)
        if found is None:
            raise ConditionError(
                f"Clause {number}: expected a field name at character {position + 1}."
            )
        position = _skip(text, found.end())
        op = _TEXT_OP.match(text, position)
        if op is None:
            raise ConditionError(
                f"Clause {number} ({found.group()} …): expected an operator "
                f"({', '.join(OPS)}) at character {position + 1}."
            )
        position = _skip(text, op.end())
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            raise ConditionError(
                f"Clause {number} ({found.group()} {op.group()} …): expected a JSON "
                f'value such as 50, "open", true or ["NO", "SE"] at character '
                f"{position + 1} (texts take double quotes)."
            ) from None
        name = "not_in" if op.group().startswith("not") else op.group()
        data.append({"field": found.group(), "op": name, "value": value})
        position = _skip(text, position)
        if position < len(text):
            joined = _AND.match(text, position)
            if joined is None:
                raise ConditionError(
                    f"Clause {number}: expected 'and' or the end at character "
                    f"{position + 1} (clauses are joined by 'and' only)."
                )
            position = _skip(text, joined.end())
            if position == len(text):
                raise ConditionError(f"Clause {number + 1}: missing after 'and'.")
    parse_condition(data)
    return data


def _skip(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position
