"""Quick start: a durable tool loop that suspends on a gated tool, then resumes.

The run checkpoints at every step boundary. When the model calls ``send_email`` (which needs
a human's approval) the run suspends with a signed pending approval; a later call — from any
process that can reach the store — settles it through ``resume_from_checkpoint`` and the run
continues where it stopped. The model is scripted, so this runs offline::

    python examples/quickstart.py
"""

from __future__ import annotations

import asyncio

from deuz_django.core import ToolResultPart, generate_text, tool
from deuz_django.core.durable import (
    DurableSession,
    create_approval_signer,
    create_in_memory_session_store,
    resume_from_checkpoint,
)
from deuz_django.core.testing import ScriptedModel, reply


@tool
def get_weather(city: str) -> dict[str, object]:
    """The current weather in a city."""
    return {"city": city, "temp_c": 22, "sky": "clear"}


@tool(needs_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email. A person must approve every call."""
    return f"sent to {to}"


async def main() -> None:
    store = create_in_memory_session_store()  # any SessionStore works
    signer = create_approval_signer(secret="change-me")  # keep the secret server-side
    tools = [get_weather, send_email]
    model = ScriptedModel(
        [
            reply(
                tool_calls=[("toolu_1", "get_weather", {"city": "Oslo"})], usage=(12, 8)
            ),
            reply(
                tool_calls=[
                    ("toolu_2", "send_email", {"to": "ana@example.com", "body": "22°C"})
                ],
                usage=(30, 12),
            ),
            reply(text="Sent Ana the Oslo weather.", usage=(45, 9)),
        ]
    )

    first = await generate_text(
        model=model,
        messages=[{"role": "user", "content": "Email Ana the weather in Oslo."}],
        tools=tools,
        max_steps=5,
        session=DurableSession(store=store, run_id="run-42"),
        approval_signer=signer,
    )
    [pending] = first.pending_approvals or ()
    checkpoint = store.load("run-42")
    assert checkpoint is not None
    print(f"leg 1: {first.finish_reason}, run {first.run_id} is {checkpoint.status}")
    print(f"  waiting for approval: {pending.tool_name}({pending.input})")
    print(f"  signed: {pending.token is not None}")

    # ...the process may die here; a person approves hours later, from another process...

    resumed = await resume_from_checkpoint(
        store,
        "run-42",
        model=model,
        tools=tools,
        max_steps=5,
        approval_signer=signer,
        approval_responses=[
            {
                "approval_id": pending.approval_id,
                "approved": True,
                "token": pending.token,
            }
        ],
    )
    checkpoint = store.load("run-42")
    assert checkpoint is not None
    [settled] = resumed.response_messages[0].parts  # the tool message settle appended
    assert isinstance(settled, ToolResultPart)
    print(
        f"leg 2: {resumed.finish_reason}, run {resumed.run_id} is {checkpoint.status}"
    )
    print(f"  settled: {settled.result}")
    print(f"  answer: {resumed.text}")
    print(
        f"  tokens: this leg {resumed.usage.total_tokens}, "
        f"whole run {checkpoint.usage.total_tokens}, boundaries {checkpoint.step_index}"
    )


if __name__ == "__main__":
    asyncio.run(main())
