"""The ``approvalProgress`` of a call that needs several approvals (docs/quorum.md)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class VoteSerializer(serializers.Serializer[Any]):
    by = serializers.CharField(help_text="Who approved.")
    onBehalfOf = serializers.CharField(
        allow_null=True, help_text="Whose rights a delegate approved with."
    )


class ProgressSerializer(serializers.Serializer[Any]):
    """How far a pending call of an approval chain has got at its current stage."""

    stage = serializers.IntegerField(help_text="The stage being asked, from 1.")
    stages = serializers.IntegerField()
    needed = serializers.IntegerField(help_text="Approvals this stage needs.")
    approvals = VoteSerializer(many=True)
    approvers = serializers.CharField(help_text="The stage's group or permission.")
    mayStill = serializers.ListField(
        child=serializers.CharField(),
        help_text="People who may still approve at this stage (the first ten).",
    )
    summary = serializers.CharField(help_text="“1 of 2 approvals · stage 2 of 2”")
