"""Questions for a person: a question tool's call suspends the run with a question, and a
person's answer — checked against it — becomes the call's result on resume."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import (
    InvalidInputError,
    Question,
    Tool,
    ToolApprovalRequest,
    ToolApprovalResponse,
    ToolContext,
    ToolResultPart,
    ask_human,
    generate_text,
    tool,
    waiting_client_calls,
)
from deuz_django.core.durable import (
    AgentCheckpoint,
    DurableSession,
    create_approval_signer,
    deserialize_checkpoint,
    resume_from_checkpoint,
    serialize_checkpoint,
)
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import make_deps

CARD_OR_CREDIT = {
    "question": "Refund to card or as store credit?",
    "choices": ["card", "store credit"],
}


class TextStore:
    """A store that keeps serialized text, as a database does: every resume reads the
    checkpoint back through the codec, like a fresh process."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}

    def save(self, checkpoint: AgentCheckpoint) -> None:
        self.rows[checkpoint.run_id] = serialize_checkpoint(checkpoint)

    def load(self, run_id: str) -> AgentCheckpoint | None:
        row = self.rows.get(run_id)
        return deserialize_checkpoint(row) if row is not None else None


async def _asked(store: Any, tools: list[Tool], args: Any, **options: Any) -> Any:
    """Leg 1: the model calls the first tool with ``args``; the run suspends."""
    return await generate_text(
        model=ScriptedModel([reply(tool_calls=[("q1", tools[0].name, args)])]),
        prompt="refund order 42",
        tools=tools,
        session=DurableSession(store, "run"),
        deps=make_deps(),
        **options,
    )


async def _answered(
    store: Any, tools: list[Tool], verdict: dict[str, Any], **options: Any
) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel([reply(text="done")])
    result = await resume_from_checkpoint(
        store,
        "run",
        model=model,
        tools=tools,
        approval_responses=[verdict],
        deps=make_deps(),
        **options,
    )
    return result, model


def _tool_result(model: ScriptedModel) -> ToolResultPart:
    """What the model saw of the question's call on its first call after the resume."""
    part = model.requests[0].messages[-1].content[0]
    assert isinstance(part, ToolResultPart)
    return part


# -- the question ---------------------------------------------------------------------------


def test_an_answer_must_be_one_of_the_choices() -> None:
    question = Question(text="Card or credit?", choices=("card", "store credit"))
    assert question.problem("card") is None
    assert question.problem("cash") == "answer: expected one of 'card', 'store credit'"


def test_an_answer_must_match_the_schema_and_the_problem_names_the_field() -> None:
    question = Question(
        text="How much?",
        schema={
            "type": "object",
            "properties": {"amount": {"type": "integer", "minimum": 1}},
            "required": ["amount"],
        },
    )
    assert question.problem({"amount": 3}) is None
    assert question.problem({"amount": "3"}) == (
        "answer.amount: '3' is not of type 'integer'"
    )
    assert question.problem({}) == "answer: 'amount' is a required property"


def test_a_plain_question_takes_non_empty_text() -> None:
    question = Question(text="Why?")
    assert question.problem("because") is None
    assert question.problem("  ") == "answer: expected a non-empty text"
    assert question.problem(3) == "answer: expected a non-empty text"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"text": ""}, "question.text: expected a non-empty string"),
        ({"text": "?", "choices": ()}, "question.choices: expected a non-empty"),
        ({"text": "?", "schema": {"type": 3}}, "question.schema: not a valid JSON"),
        (
            {"text": "?", "choices": ("a",), "schema": {}},
            "question: give either choices or a schema, not both",
        ),
    ],
)
def test_a_malformed_question_is_refused(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidInputError, match=problem.replace("?", r"\?")):
        Question(**fields)


def test_the_question_travels_on_the_request_and_back() -> None:
    request = ToolApprovalRequest(
        approval_id="q1",
        tool_call_id="q1",
        tool_name="ask_human",
        input=CARD_OR_CREDIT,
        question=Question(text="Card?", choices=("card", "credit")),
    )
    data = request.to_json()
    assert list(data) == ["approvalId", "toolCallId", "toolName", "input", "question"]
    assert data["question"] == {"text": "Card?", "choices": ["card", "credit"]}
    assert ToolApprovalRequest.from_json(data).question == request.question


def test_an_approval_request_has_no_question_key() -> None:
    # The reference's wire shape stays as it was for every tool that asks nothing.
    request = ToolApprovalRequest(
        approval_id="c1", tool_call_id="c1", tool_name="pay", input={}
    )
    assert "question" not in request.to_json()


def test_the_answer_travels_on_the_verdict() -> None:
    verdict = ToolApprovalResponse.from_json(
        {"approvalId": "q1", "approved": True, "answer": {"amount": 3}}
    )
    assert verdict.answer == {"amount": 3}
    assert verdict.to_json()["answer"] == {"amount": 3}
    assert (
        "answer" not in ToolApprovalResponse(approval_id="c", approved=True).to_json()
    )


# -- ask → suspend → answer → resume --------------------------------------------------------


async def test_ask_human_suspends_the_run_with_its_question() -> None:
    store = TextStore()
    result = await _asked(store, [ask_human], CARD_OR_CREDIT)
    [pending] = result.pending_approvals
    assert pending.tool_name == "ask_human"
    assert pending.question == Question(
        text="Refund to card or as store credit?", choices=("card", "store credit")
    )
    checkpoint = store.load("run")
    assert checkpoint is not None
    assert checkpoint.status == "suspended"
    assert checkpoint.pending_approvals is not None
    assert checkpoint.pending_approvals[0].question == pending.question


async def test_the_answer_becomes_the_tool_result_after_a_restart() -> None:
    store = TextStore()
    await _asked(store, [ask_human], CARD_OR_CREDIT)
    result, model = await _answered(
        store, [ask_human], {"approvalId": "q1", "approved": True, "answer": "card"}
    )
    answered = _tool_result(model)
    assert (answered.tool_use_id, answered.result, answered.is_error) == (
        "q1",
        "card",
        None,
    )
    assert result.text == "done"


async def test_an_answer_that_fails_the_question_is_refused_on_resume() -> None:
    # Fail closed: the resume checks the answer again, whoever recorded it.
    store = TextStore()
    await _asked(store, [ask_human], CARD_OR_CREDIT)
    _, model = await _answered(
        store, [ask_human], {"approvalId": "q1", "approved": True, "answer": "cash"}
    )
    refused = _tool_result(model)
    assert refused.is_error is True
    assert refused.result == (
        "Tool call denied. Reason: Invalid answer: answer: expected one of "
        "'card', 'store credit'"
    )


async def test_a_question_approved_without_an_answer_is_denied() -> None:
    store = TextStore()
    await _asked(store, [ask_human], CARD_OR_CREDIT)
    _, model = await _answered(
        store, [ask_human], {"approvalId": "q1", "approved": True}
    )
    assert _tool_result(model).result == (
        "Tool call denied. Reason: No answer was given to the question."
    )


async def test_declining_to_answer_tells_the_model_why() -> None:
    store = TextStore()
    await _asked(store, [ask_human], CARD_OR_CREDIT)
    _, model = await _answered(
        store,
        [ask_human],
        {"approvalId": "q1", "approved": False, "reason": "Ask the customer."},
    )
    assert _tool_result(model).result == "Tool call denied. Reason: Ask the customer."


async def test_a_question_tools_execute_receives_the_answer() -> None:
    seen: list[Any] = []

    @tool(question=Question(text="Which size?", choices=("S", "M", "L")))
    def order_shirt(colour: str, ctx: ToolContext) -> str:
        """Order a shirt in the size the customer picks."""
        seen.append((colour, ctx.answer))
        return f"ordered a {colour} shirt in {ctx.answer}"

    store = TextStore()
    result = await _asked(store, [order_shirt], {"colour": "red"})
    assert result.pending_approvals[0].question.choices == ("S", "M", "L")
    assert seen == []  # nothing runs before the answer
    _, model = await _answered(
        store, [order_shirt], {"approvalId": "q1", "approved": True, "answer": "M"}
    )
    assert seen == [("red", "M")]
    assert _tool_result(model).result == "ordered a red shirt in M"


async def test_a_question_built_from_the_input_is_asked_and_checked() -> None:
    refund = Tool(
        name="refund_method",
        parameters={"type": "object", "properties": {"amount": {"type": "number"}}},
        question=lambda args: Question(
            text=f"Refund {args['amount']} EUR how?", choices=("card", "credit")
        ),
    )
    store = TextStore()
    result = await _asked(store, [refund], {"amount": 30})
    assert result.pending_approvals[0].question.text == "Refund 30 EUR how?"
    _, model = await _answered(
        store, [refund], {"approvalId": "q1", "approved": True, "answer": "credit"}
    )
    assert _tool_result(model).result == "credit"


async def test_a_question_whose_input_cannot_build_it_is_still_asked() -> None:
    store = TextStore()
    result = await _asked(store, [ask_human], {"choices": ["a"]})
    question = result.pending_approvals[0].question
    assert question.text.startswith("ask_human asks for an answer, but its question")
    assert question.choices is None


async def test_a_server_approver_never_answers_a_question() -> None:
    # Only a person answers: the run suspends even when a server approver is given.
    store = TextStore()
    result = await _asked(
        store, [ask_human], CARD_OR_CREDIT, approve_tool_call=lambda call, _: True
    )
    assert [p.tool_name for p in result.pending_approvals] == ["ask_human"]


async def test_a_signed_question_needs_its_token_with_the_answer() -> None:
    signer = create_approval_signer(secret="s" * 32)
    store = TextStore()
    result = await _asked(store, [ask_human], CARD_OR_CREDIT, approval_signer=signer)
    token = result.pending_approvals[0].token
    assert token is not None
    copy = TextStore()
    copy.rows = dict(store.rows)
    _, forged = await _answered(
        copy,
        [ask_human],
        {"approvalId": "q1", "approved": True, "answer": "card", "token": "v1.x.y"},
        approval_signer=signer,
    )
    assert _tool_result(forged).is_error is True
    _, model = await _answered(
        store,
        [ask_human],
        {"approvalId": "q1", "approved": True, "answer": "card", "token": token},
        approval_signer=signer,
    )
    assert _tool_result(model).result == "card"


# -- D11: a client tool's real result crosses a restart ---------------------------------------


async def test_a_client_tools_real_result_reaches_the_model_after_a_restart() -> None:
    # D11: the reference feeds a placeholder (SPEC R5.14); a verdict with the call's id
    # and an answer gives the client tool its real result instead.
    pick_colour = Tool(name="pick_colour")  # no execute: the client runs it
    store = TextStore()
    result = await _asked(store, [pick_colour], {})
    assert result.pending_approvals is None  # a client call is no approval request
    checkpoint = store.load("run")
    assert checkpoint is not None
    [waiting] = waiting_client_calls(checkpoint.messages, {"pick_colour": pick_colour})
    assert (waiting.tool_call_id, waiting.tool_name) == ("q1", "pick_colour")

    _, model = await _answered(
        store, [pick_colour], {"approvalId": "q1", "approved": True, "answer": "blue"}
    )
    assert _tool_result(model).result == "blue"
    assert _tool_result(model).is_error is None


async def test_a_client_tool_without_a_result_still_gets_the_placeholder() -> None:
    # SPEC R5.14: unchanged when no result is given.
    pick_colour = Tool(name="pick_colour")
    store = TextStore()
    await _asked(store, [pick_colour], {})
    _, model = await _answered(
        store, [pick_colour], {"approvalId": "other", "approved": True}
    )
    assert _tool_result(model).result == (
        "Tool call denied. Reason: No result provided for this client tool."
    )
