"""Edit, then approve: an approving verdict's ``editedInput`` runs an ``editable`` tool
with the edited input, and the tool result tells the model a person changed it; anything
else (a tool that is not editable, an edit failing the schema) is denied, never run."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import Message, ToolUsePart, generate_text, tool
from deuz_django.core.approvals import EDITED_NOTE, ToolApprovalResponse
from deuz_django.core.exceptions import InvalidInputError
from deuz_django.core.testing import ScriptedModel, reply

RAN: list[dict[str, Any]] = []


@tool(needs_approval=True, editable=True)
def pay(to: str, amount: float) -> str:
    """Pay someone."""
    RAN.append({"to": to, "amount": amount})
    return f"paid {amount} to {to}"


@tool(needs_approval=True)
def wire(to: str, amount: float) -> str:
    """Wire money (not editable)."""
    RAN.append({"to": to, "amount": amount})
    return "wired"


@pytest.fixture(autouse=True)
def fresh() -> None:
    RAN.clear()


async def settle(name: str, edited: dict[str, Any]) -> tuple[Any, bool | None]:
    history = [
        Message("user", "pay ann"),
        Message("assistant", (ToolUsePart("c1", name, {"to": "ann", "amount": 50}),)),
    ]
    result = await generate_text(
        model=ScriptedModel([reply(text="done")]),
        messages=history,
        tools=[pay, wire],
        approval_responses=[
            {"approvalId": "c1", "approved": True, "editedInput": edited}
        ],
    )
    (part,) = result.response_messages[0].content
    return part.result, part.is_error


async def test_an_edited_call_runs_with_its_edited_input_and_the_model_is_told() -> (
    None
):
    result, is_error = await settle("pay", {"to": "ann", "amount": 20})
    assert RAN == [{"to": "ann", "amount": 20.0}]
    assert not is_error
    assert result == {
        "result": "paid 20.0 to ann",
        "editedInput": {"to": "ann", "amount": 20},
        "note": EDITED_NOTE,
    }


async def test_an_edit_of_a_tool_that_is_not_editable_is_denied() -> None:
    result, is_error = await settle("wire", {"to": "ann", "amount": 20})
    assert RAN == []
    assert is_error
    assert result == (
        "Tool call denied. Reason: Invalid edited input: the input of wire calls may not "
        "be edited"
    )


async def test_an_edit_failing_the_schema_is_denied_naming_the_field() -> None:
    result, is_error = await settle("pay", {"to": "ann", "amount": "lots"})
    assert RAN == []
    assert is_error
    assert "Invalid edited input: amount:" in result


def test_edited_input_must_be_an_object() -> None:
    with pytest.raises(InvalidInputError, match="editedInput: expected an object"):
        ToolApprovalResponse.from_json(
            {"approvalId": "c1", "approved": True, "editedInput": [1]}
        )
