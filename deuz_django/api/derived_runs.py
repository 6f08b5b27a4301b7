"""The bodies of the requests that make a run from another one: a fork at one of its
steps, a replay of a finished run (``POST runs/<id>/fork/``, ``…/replay/``, the
WebSocket's ``fork`` frame)."""

from __future__ import annotations

from typing import Any, cast

from rest_framework import serializers

from ..core.durable import ForkEdit
from ..registry import agent_names
from .serializers import (
    AgentField,
    RunIdField,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    check_json_text,
)


class ForkEditSerializer(serializers.Serializer[Any]):
    """What a fork changes at its step: the message that started it, or one call's
    input (the core checks which goes with which fork point)."""

    message = StrictCharField(
        required=False,
        max_length=100_000,
        help_text="Forking before the turn: the new text of the user message that "
        "started the step (ask differently).",
    )
    toolCallId = StrictCharField(
        required=False,
        max_length=200,
        help_text="Forking with the turn: the call of the kept turn whose input "
        "changes (correct the agent).",
    )
    input = serializers.JSONField(
        required=False,
        help_text="With toolCallId: the call's new input, checked against its tool's "
        "schema.",
    )

    def validate_input(self, value: Any) -> Any:
        check_json_text(value)
        return value


class ForkSerializer(serializers.Serializer[Any]):
    """A fork of a run at one of its steps (``POST runs/<id>/fork/``, the WebSocket's
    ``fork`` frame)."""

    step = StrictIntegerField(
        min_value=0,
        help_text="The step to fork from: the fork starts from the history that "
        "step's model call answered.",
    )
    withTurn = StrictBooleanField(
        default=False,
        help_text="Keep the step's model turn (no model call; its calls go through "
        "the gates again), instead of asking the model anew.",
    )
    edit = ForkEditSerializer(required=False)
    runId = RunIdField(
        required=False, help_text="The fork's run id (a new one when not given)."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        edit = attrs.get("edit")
        attrs["edit"] = (
            None
            if edit is None
            else ForkEdit(
                edit.get("message"), edit.get("toolCallId"), edit.get("input")
            )
        )
        return attrs


class ReplaySerializer(serializers.Serializer[Any]):
    """What a replay changes: another agent, another system prompt, or neither."""

    agent = AgentField(
        required=False,
        help_text="A registered agent to replay with (default: the run's own).",
    )
    system = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=20000,
        help_text="The system prompt to replay with (default or blank: the agent's "
        "own; with neither, the run's).",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(AgentField, self.fields["agent"]).choices = agent_names()
