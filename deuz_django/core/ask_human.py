"""The built-in question tool: the model asks a person, and the answer is its result.

>>> ask_human.question({"question": "Card or store credit?", "choices": ["card", "credit"]})
Question(text='Card or store credit?', choices=('card', 'credit'), schema=None)
"""

from __future__ import annotations

from typing import Any

from .questions import Question
from .tools import Tool


def _ask_human_question(args: Any) -> Question:
    data = args if isinstance(args, dict) else {}
    choices = data.get("choices")
    return Question(
        text=data.get("question"),  # type: ignore[arg-type]  # checked in __post_init__
        choices=tuple(choices) if isinstance(choices, list) else choices,
        schema=data.get("schema"),
    )


ask_human: Tool = Tool(
    name="ask_human",
    description=(
        "Ask a person a question and wait for the answer; the answer is this "
        "tool's result. Give choices when the answer is one of a few options, or "
        "a JSON schema when it must be structured data."
    ),
    parameters={
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "What to ask."},
            "choices": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The options the person picks from.",
            },
            "schema": {
                "type": "object",
                "description": "A JSON Schema the answer must match.",
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    },
    question=_ask_human_question,
)
"""The built-in question tool: ``ask_human(question, choices=None, schema=None)``; the
person's answer is its result."""
