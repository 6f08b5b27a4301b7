"""What the API reads, with Deuz's camelCase field names (what it writes:
``representations``).

Input fields are strict (SPEC R12.1): a string field takes only a JSON string and a boolean
field only ``true``/``false`` — DRF's defaults would quietly turn ``5`` into ``"5"`` or
``"yes"`` into ``True``.
"""

from __future__ import annotations

from typing import Any, cast

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from ..core.exceptions import InvalidInputError
from ..core.messages import coerce_messages
from ..models import RUN_ID_PATTERN, ApprovalStatus, RunStatus
from ..models.rules import GrantScope
from ..registry import agent_names
from .exceptions import invalid_input
from .schema import MESSAGE_SCHEMA

MAX_VERDICTS = 100  # SPEC R12.1
MAX_SAFE_INTEGER = 2**53 - 1  # the largest integer every JSON client reads exactly
# What no stored text may hold: PostgreSQL refuses NUL, UTF-8 refuses lone surrogates.
TEXT_VALIDATORS = (
    ProhibitNullCharactersValidator(),
    ProhibitSurrogateCharactersValidator(),
)


def check_text(value: str) -> None:
    """Raise the validation error a text field would for NUL or a lone surrogate."""
    try:
        for validator in TEXT_VALIDATORS:
            validator(value)
    except DjangoValidationError as error:  # the NUL validator is Django's own
        raise serializers.ValidationError(error.messages, code=error.code) from None


def check_json_text(value: Any) -> None:
    """Every string (keys too) of a JSON value passes :func:`check_text`; the error is
    nested where the bad string is, so it is reported as ``messages[0].content``."""
    where: list[int | str] = []

    def walk(item: Any) -> None:
        if isinstance(item, str):
            check_text(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                check_text(str(key))
                where.append(str(key))
                walk(child)
                where.pop()
        elif isinstance(item, list):
            for index, child in enumerate(item):
                where.append(index)
                walk(child)
                where.pop()

    try:
        walk(value)
    except serializers.ValidationError as error:
        detail: Any = error.detail
        for part in reversed(where):
            detail = {part: detail}
        raise serializers.ValidationError(detail) from None


class StrictCharField(serializers.CharField):
    """A JSON string, never a number or a bool coerced to one; whitespace kept."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictBooleanField(serializers.BooleanField):
    """``true`` or ``false`` only."""

    default_error_messages = {"invalid": "Must be a boolean (true or false)."}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer only: never a string of digits, a float or a bool; at most
    ``MAX_SAFE_INTEGER`` in size (a bigger one is refused, never sent to the database)."""

    default_error_messages = {"invalid": "Must be an integer."}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_value", MAX_SAFE_INTEGER)
        kwargs.setdefault("min_value", -MAX_SAFE_INTEGER)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return int(super().to_internal_value(data))


@extend_schema_field(
    {"type": "string", "pattern": "^[A-Za-z0-9_-]+$", "maxLength": 100}
)
class RunIdField(StrictCharField):
    """A caller-chosen run id: letters, digits, ``_`` and ``-`` (it goes into URLs)."""

    default_error_messages = {
        "pattern": "Use only letters, digits, '_' and '-' (at most 100 characters)."
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=100, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not RUN_ID_PATTERN.fullmatch(value):
            self.fail("pattern")
        return value


@extend_schema_field({"type": "array", "items": MESSAGE_SCHEMA, "minItems": 1})
class MessagesField(serializers.ListField):
    """Input messages as plain JSON; the core validates them (its errors name the field)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.JSONField(), min_length=1, **kwargs)

    def to_internal_value(self, data: Any) -> list[Any]:
        messages: list[Any] = super().to_internal_value(data)
        check_json_text(messages)
        return messages


# -- input ----------------------------------------------------------------------------------


class AllowSerializer(serializers.Serializer[Any]):
    """ "Approve, and allow this tool" (deuz_django.rules.grants); the verdict's checks say
    which combinations hold (hours only for the owner scope, within the bound)."""

    scope = serializers.ChoiceField(
        choices=GrantScope.choices,
        help_text="run: the tool's later calls in this run; owner: in the run "
        "owner's runs of this agent, for `hours`.",
    )
    hours = StrictIntegerField(
        required=False,
        help_text="With scope owner: how long the grant lasts (1 to "
        "DEUZ['GRANT_MAX_HOURS'], 168 by default).",
    )


class VerdictSerializer(serializers.Serializer[Any]):
    """One verdict: approving needs the approval's signed token, denying does not."""

    approvalId = StrictCharField(max_length=200)
    approved = StrictBooleanField()
    reason = StrictCharField(required=False, allow_blank=True, max_length=2000)
    token = StrictCharField(
        required=False, allow_blank=True, help_text="The approval's token, echoed back."
    )
    result = serializers.JSONField(
        required=False,
        help_text=(
            "Only with approved=true on an approval of kind outcome_unknown: "
            '"it happened", and this is the call\'s result; the run uses it without '
            "running the call. Approving without it runs the call again; denying "
            "marks it failed."
        ),
    )

    editedInput = serializers.DictField(
        required=False,
        help_text=(
            "Only with approved=true on a call of an editable tool, by a user holding "
            "deuz_django.edit_approval_input: the input the call runs with instead of "
            "the model's (checked against the tool's schema). The token still pins the "
            "model's call; an edit never changes the tool."
        ),
    )

    allow = AllowSerializer(
        required=False,
        help_text=(
            "Only with approved=true on a gated call: approve, and allow the same "
            "tool's later calls — for the rest of this run, or for the run owner's "
            "runs for some hours (never for a tool the owner may not approve)."
        ),
    )

    answer = serializers.JSONField(
        required=False,
        help_text=(
            "Only with approved=true on an approval of kind question: the answer — "
            "one of its choices, a JSON value matching its schema, or text. It is "
            "checked against the question and becomes the call's result. On one of "
            "kind client_tool: the client tool's result (any JSON value; no token)."
        ),
    )

    def validate_result(self, value: Any) -> Any:
        check_json_text(value)
        return value

    def validate_answer(self, value: Any) -> Any:
        check_json_text(value)
        return value

    def validate_editedInput(self, value: dict[str, Any]) -> dict[str, Any]:
        check_json_text(value)
        return value

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict) and "toolName" in data:
            raise serializers.ValidationError(
                {
                    "toolName": [
                        "A verdict never names the tool: an edit changes only the "
                        "call's input (editedInput), and the token pins the tool."
                    ]
                },
                code="invalid",
            )
        return super().to_internal_value(data)


class VerdictBatchSerializer(serializers.Serializer[Any]):
    """Verdicts for one run, all recorded or none; the run resumes when none is left."""

    verdicts = serializers.ListField(
        child=VerdictSerializer(), min_length=1, max_length=MAX_VERDICTS
    )
    resume = StrictBooleanField(
        default=True,
        help_text="Resume the run in the background once no approval is left undecided.",
    )


class StopSerializer(serializers.Serializer[Any]):
    reason = StrictCharField(
        default="",
        allow_blank=True,
        max_length=1000,
        help_text="Why the run is stopped (kept with the run, shown to its people).",
    )


class ResumeSerializer(serializers.Serializer[Any]):
    denyRemaining = StrictBooleanField(
        default=False, help_text="Deny every approval still undecided, then resume."
    )


class AgentField(serializers.ChoiceField):
    """The name of a registered agent (a JSON string); an unknown one is ``unknown_agent``."""

    default_error_messages = {"invalid": "Not a valid string."}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=[], **kwargs)  # the registry's, set per serializer

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        check_text(data)  # before the name is echoed in a message
        if data not in self.choices:
            known = ", ".join(sorted(self.choices)) or "none"
            raise serializers.ValidationError(
                f'Unknown agent "{data}" (registered: {known}).', code="unknown_agent"
            )
        return data


class StartRunSerializer(serializers.Serializer[Any]):
    """A run of a registered agent; ``text`` is a shorthand for a last user message."""

    agent = AgentField()
    messages = MessagesField(required=False)
    text = StrictCharField(required=False)
    runId = RunIdField(required=False)
    title = StrictCharField(required=False, allow_blank=True, max_length=200)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(AgentField, self.fields["agent"]).choices = agent_names()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        messages = list(attrs.get("messages", []))
        if "text" in attrs:
            messages.append({"role": "user", "content": attrs["text"]})
        if not messages:
            raise serializers.ValidationError(
                {"messages": ["Give messages or text."]}, code="required"
            )
        try:
            attrs["history"] = coerce_messages(messages)
        except InvalidInputError as error:
            raise invalid_input(error) from None
        return attrs


class RunFilterSerializer(serializers.Serializer[Any]):
    """Query parameters of the run list."""

    status = serializers.ChoiceField(choices=RunStatus.choices, required=False)
    agent = serializers.CharField(required=False, max_length=100)


class ApprovalFilterSerializer(serializers.Serializer[Any]):
    """Query parameters of the approval list (pending ones unless ``status`` says)."""

    status = serializers.ChoiceField(
        choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING
    )
    runId = serializers.CharField(required=False, max_length=500)
    toolName = serializers.CharField(required=False, max_length=200)


# -- output ---------------------------------------------------------------------------------
