"""What the API writes for a replay's comparison with its original
(:mod:`deuz_django.runs.replays`): the two runs, what the replay changed, why it stopped,
and the two transcripts step by step (:mod:`deuz_django.core.comparison`)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..models import Run
from ..runs.replays import ReplayComparison
from .representations import json_bytes


class ComparedRunSerializer(serializers.Serializer[Any]):
    """One side of a comparison. Its ``status`` is a plain string: the run's choice set
    under a second component makes drf-spectacular name it by a hash, and its deploy
    check warn (``drf_spectacular.W001``) in every project that serves the API."""

    runId = serializers.CharField()
    agent = serializers.CharField()
    status = serializers.CharField(
        help_text="The run's status: running, suspended, completed or stopped."
    )


class ComparedCallSerializer(serializers.Serializer[Any]):
    """A tool call of one side of a step, with the result it was given."""

    toolName = serializers.CharField()
    input = serializers.JSONField()
    result = serializers.JSONField(
        allow_null=True, help_text="The result (null when unanswered)."
    )
    isError = serializers.BooleanField()
    answered = serializers.BooleanField(
        help_text="False for a call that got no result: a replay's diverging call, "
        "which was never executed."
    )
    onlyHere = serializers.BooleanField(
        help_text="The other side's step made no such call (same tool, same input)."
    )


class StepSideSerializer(serializers.Serializer[Any]):
    text = serializers.CharField(allow_blank=True, help_text="The assistant's text.")
    calls = ComparedCallSerializer(many=True)


class ComparedStepSerializer(serializers.Serializer[Any]):
    index = serializers.IntegerField()
    same = serializers.BooleanField()
    differences = serializers.ListField(
        child=serializers.ChoiceField(choices=["text", "calls", "results", "missing"]),
        help_text="text: the text changed; calls: a call made on one side only; "
        "results: the same call got another result; missing: one side has no such "
        "step.",
    )
    original = StepSideSerializer(allow_null=True)
    replay = StepSideSerializer(allow_null=True)


class ComparisonSerializer(serializers.Serializer[Any]):
    """A replay beside its original, step by step."""

    original = ComparedRunSerializer()
    replay = ComparedRunSerializer()
    replayOptions = serializers.JSONField(
        help_text="What the replay was asked to change: agent, system (null: not "
        "changed), and operator when one asked from a shell."
    )
    stopped = serializers.CharField(
        allow_blank=True,
        help_text="Why the replay stopped — where it diverged: the model asked for a "
        "call the original never made, which was not executed (empty: it did not).",
    )
    same = serializers.BooleanField()
    firstDivergence = serializers.IntegerField(
        allow_null=True, help_text="The first step that differs (null: none)."
    )
    steps = ComparedStepSerializer(many=True)


def _run(run: Run) -> dict[str, Any]:
    return {"runId": run.run_id, "agent": run.agent, "status": run.status}


def comparison_json(compared: ReplayComparison) -> dict[str, Any]:
    """The comparison as the API writes it (byte strings as base64 text)."""
    return {
        "original": _run(compared.original),
        "replay": _run(compared.replay),
        "replayOptions": compared.replay.replay_options,
        "stopped": compared.stopped,
        **json_bytes(compared.comparison.to_json()),
    }
