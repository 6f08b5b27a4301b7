"""Questions for a person: a tool call that suspends the run until someone answers it.

A *question tool* (``Tool(question=...)``, or the built-in
:data:`~deuz_django.core.ask_human.ask_human`) is gated
like a tool that needs approval, but its pending request carries a :class:`Question`, and
the verdict that settles it carries an ``answer``. The answer is checked against the
question (:meth:`Question.problem`) and becomes the call's result — or, for a tool with
``execute``, reaches it as ``ctx.answer``::

    >>> ask = Question(text="Refund to card or as store credit?",
    ...                choices=("card", "store credit"))
    >>> ask.problem("cash")
    "answer: expected one of 'card', 'store credit'"
    >>> ask.problem("card") is None
    True

A question with a JSON ``schema`` takes any JSON value the schema accepts (checked with
the ``jsonschema`` library); one with neither choices nor schema takes non-empty text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import jsonschema
from jsonschema.validators import validator_for

from .exceptions import InvalidInputError


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """What a person is asked: ``text``, and optionally the ``choices`` the answer is one
    of or the JSON ``schema`` it must match (not both)."""

    text: str
    choices: tuple[str, ...] | None = None
    schema: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise InvalidInputError("question.text: expected a non-empty string")
        if self.choices is not None:
            if not self.choices or not all(isinstance(c, str) for c in self.choices):
                raise InvalidInputError(
                    "question.choices: expected a non-empty list of strings"
                )
            object.__setattr__(self, "choices", tuple(self.choices))
        if self.schema is not None:
            if self.choices is not None:
                raise InvalidInputError(
                    "question: give either choices or a schema, not both"
                )
            if not isinstance(self.schema, dict):
                raise InvalidInputError("question.schema: expected an object")
            try:
                validator_for(self.schema).check_schema(self.schema)
            except jsonschema.SchemaError as error:
                raise InvalidInputError(
                    f"question.schema: not a valid JSON Schema: {error.message}"
                ) from None

    def problem(self, answer: Any) -> str | None:
        """Why ``answer`` does not answer this question (``None``: it does); the
        problem names where in the answer it lies (``answer.amount: …``)."""
        if self.choices is not None:
            if answer in self.choices:
                return None
            listed = ", ".join(repr(c) for c in self.choices)
            return f"answer: expected one of {listed}"
        if self.schema is not None:
            validator = validator_for(self.schema)(self.schema)
            error = jsonschema.exceptions.best_match(validator.iter_errors(answer))
            if error is None:
                return None
            where = "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path
            )
            return f"answer{where}: {error.message}"
        if isinstance(answer, str) and answer.strip():
            return None
        return "answer: expected a non-empty text"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text}
        if self.choices is not None:
            out["choices"] = list(self.choices)
        if self.schema is not None:
            out["schema"] = self.schema
        return out

    @classmethod
    def from_json(cls, data: Any, *, path: str = "question") -> Question:
        if not isinstance(data, dict):
            raise InvalidInputError(f"{path}: expected an object")
        choices = data.get("choices")
        if choices is not None and not isinstance(choices, list):
            raise InvalidInputError(f"{path}.choices: expected a list of strings")
        return cls(
            text=data.get("text"),  # type: ignore[arg-type]  # checked in __post_init__
            choices=None if choices is None else tuple(choices),
            schema=data.get("schema"),
        )


QuestionSource = Question | Callable[[Any], Question]
"""What a question tool declares: a fixed :class:`Question`, or one built from the
call's input."""


class Asking(Protocol):
    """What :func:`question_of` reads of a tool (a :class:`~deuz_django.core.Tool`):
    its name and the question it declares — so questions sit below tools."""

    @property
    def name(self) -> str: ...

    @property
    def question(self) -> QuestionSource | None: ...


def question_of(tool: Asking | None, args: Any) -> Question | None:
    """The question a call of ``tool`` asks (``None``: it asks none). A question that
    cannot be built from the model's input is still asked — as plain text naming the
    problem — so the run never suspends on a call nobody can answer."""
    if tool is None or tool.question is None:
        return None
    if isinstance(tool.question, Question):
        return tool.question
    try:
        return tool.question(args)
    except Exception as error:
        return Question(
            text=f"{tool.name} asks for an answer, but its question could not be "
            f"read from {args!r}: {error}"
        )
