"""What the API writes, with Deuz's camelCase field names (what it reads: ``serializers``).

Messages come out in Deuz's JSON form, with every byte string as standard base64 text
(the form Deuz accepts for images).
"""

from __future__ import annotations

import base64
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..approvals.tool_versions import definition_changes
from ..core.durable.codec import decode_json
from ..models import (
    Approval,
    ApprovalKind,
    ApprovalStatus,
    Run,
    RunCall,
    RunMessage,
    RunStatus,
)
from ..quorum.progress import progress_of
from .lineage import ForkLineage
from .progress import ProgressSerializer
from .schema import MESSAGE_SCHEMA, USAGE_SCHEMA


class AutomaticDecisionSerializer(serializers.Serializer[Any]):
    """The standing rule or grant that decided a call (deuz_django.rules.automatic)."""

    kind = serializers.ChoiceField(choices=["rule", "grant"])
    id = serializers.IntegerField()
    description = serializers.CharField()
    madeBy = serializers.CharField(
        allow_null=True, help_text="Whose rights it decided with."
    )


class QuestionSerializer(serializers.Serializer[Any]):
    """What a question tool's call asks a person (deuz_django.approvals.questions)."""

    text = serializers.CharField()
    choices = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="The answer is one of these.",
    )
    schema = serializers.JSONField(
        required=False, help_text="A JSON Schema the answer must match."
    )


class ExecutionSerializer(serializers.ModelSerializer[RunCall]):
    """One execution of a tool call, and where it ran."""

    stepIndex = serializers.IntegerField(
        source="step.step_index", help_text="The step of the run (or sub-agent run)."
    )
    runId = serializers.CharField(
        source="step.run.run_id",
        help_text="The run it ran in: the run's own, or a sub-agent's.",
    )
    toolCallId = serializers.CharField(source="tool_call_id")
    toolName = serializers.CharField(source="tool_name")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    isError = serializers.BooleanField(source="is_error")

    class Meta:
        model = RunCall
        fields = [
            "runId",
            "stepIndex",
            "toolCallId",
            "toolName",
            "startedAt",
            "finished",
            "isError",
        ]
        read_only_fields = fields


class ApprovalSerializer(serializers.ModelSerializer[Approval]):
    """A gated call and its verdict; ``token`` is present while the approval is pending."""

    approvalId = serializers.CharField(source="approval_id")
    kind = serializers.ChoiceField(
        choices=ApprovalKind.choices,
        help_text=(
            "approval: a gated call asks to run; outcome_unknown: a call started "
            "before a crash and left no outcome (answer with a result, approve to run "
            "it again, or deny to mark it failed); question: a call asks a person "
            "(approve with an answer; deny to decline); client_tool: a client tool's "
            "call waits for the result its client sends (approve with it as answer)."
        ),
    )
    runId = serializers.CharField(source="run.run_id")
    toolCallId = serializers.CharField(source="tool_call_id")
    toolName = serializers.CharField(source="tool_name")
    input = serializers.JSONField(
        help_text="The call's arguments, as the model gave them."
    )
    editedInput = serializers.JSONField(
        source="edited_input",
        allow_null=True,
        help_text="The arguments a person changed the call to before approving it.",
    )
    question = QuestionSerializer(
        allow_null=True, help_text="What a question asks; null for other kinds."
    )
    answer = serializers.JSONField(
        allow_null=True,
        help_text="A question's answer (its decidedBy answered); null before.",
    )
    agentPath = serializers.ListField(
        child=serializers.CharField(), source="agent_path"
    )
    token = serializers.SerializerMethodField()
    decidedBy = serializers.SerializerMethodField()
    decidedOnBehalfOf = serializers.CharField(
        source="decided_on_behalf_of.get_username",
        allow_null=True,
        read_only=True,
        help_text="A delegate's decision: whose rights it used (decidedBy delegated).",
    )
    automaticDecision = serializers.SerializerMethodField()
    approvalProgress = serializers.SerializerMethodField()
    decidedAt = serializers.DateTimeField(source="decided_at", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    deadline = serializers.DateTimeField(
        source="deadline_at",
        allow_null=True,
        help_text="When the call times out (it is then recorded expired and the run "
        "goes on) or, with escalateTo, escalates; null: it waits for a person.",
    )
    remindAt = serializers.DateTimeField(
        source="remind_at",
        allow_null=True,
        help_text="When a reminder is due (approval_reminder); null: none.",
    )
    remindedAt = serializers.DateTimeField(
        source="reminded_at", allow_null=True, help_text="When the reminder went out."
    )
    escalateTo = serializers.SerializerMethodField(
        help_text="Whom the call goes to at its deadline before it can time out: "
        "'perm:<app_label.codename>' or 'group:<name>'; null: it times out then."
    )
    escalatedAt = serializers.DateTimeField(
        source="escalated_at",
        allow_null=True,
        help_text="When the deadline escalated the call (and moved the deadline on).",
    )
    stepIndex = serializers.IntegerField(
        source="step_index",
        allow_null=True,
        help_text="The run's boundary that asked: a verdict settles this ask of the "
        "call only; a call asked again later (a re-used call id) is a new approval.",
    )
    toolChanges = serializers.SerializerMethodField(
        help_text="What a deploy changed in the tool since the call was asked (empty: "
        "nothing). A verdict runs the tool as defined when it is given, never a later "
        "definition."
    )
    execution = serializers.SerializerMethodField(
        help_text="The execution this decision authorized (its receipt): null until "
        "the call ran on it. A decision authorizes one execution."
    )

    class Meta:
        model = Approval
        fields = [
            "approvalId",
            "kind",
            "runId",
            "toolCallId",
            "toolName",
            "input",
            "editedInput",
            "question",
            "answer",
            "agentPath",
            "token",
            "status",
            "decidedBy",
            "decidedOnBehalfOf",
            "automaticDecision",
            "approvalProgress",
            "decidedAt",
            "reason",
            "createdAt",
            "deadline",
            "remindAt",
            "remindedAt",
            "escalateTo",
            "escalatedAt",
            "stepIndex",
            "toolChanges",
            "execution",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_toolChanges(self, approval: Approval) -> list[str]:
        return definition_changes(approval) if approval.is_pending else []

    @extend_schema_field(ExecutionSerializer(allow_null=True))
    def get_execution(self, approval: Approval) -> dict[str, Any] | None:
        call = approval.receipt
        return None if call is None else ExecutionSerializer(call).data

    def get_token(self, approval: Approval) -> str | None:
        return approval.token if approval.is_pending and approval.token else None

    def get_decidedBy(self, approval: Approval) -> str | None:
        user = approval.decided_by
        return None if user is None else user.get_username()

    def get_escalateTo(self, approval: Approval) -> str | None:
        return approval.escalate_to or None

    @extend_schema_field(ProgressSerializer(allow_null=True))
    def get_approvalProgress(self, approval: Approval) -> dict[str, Any] | None:
        progress = progress_of(approval)
        return None if progress is None else progress.to_json()

    @extend_schema_field(AutomaticDecisionSerializer(allow_null=True))
    def get_automaticDecision(self, approval: Approval) -> dict[str, Any] | None:
        decider = approval.automatic
        if decider is None:
            return None
        maker = decider.created_by
        return {
            "kind": "grant" if approval.decided_by_grant_id else "rule",
            "id": decider.pk,
            "description": str(decider),
            "madeBy": None if maker is None else maker.get_username(),
        }


class RunStopSerializer(serializers.Serializer[Any]):
    """A stop asked for on a run."""

    by = serializers.CharField(
        help_text="Who asked: a user's name, 'NAME (operator)' from a shell, or 'the "
        "system' (a run-wide limit or a loop)."
    )
    reason = serializers.CharField()
    requestedAt = serializers.DateTimeField()
    stoppedAt = serializers.DateTimeField(allow_null=True)


class RunSerializer(ForkLineage, serializers.ModelSerializer[Run]):
    """A root run: its state, cumulative usage, the approvals it waits for, and its
    lineage (the run it was forked from, the forks made of it)."""

    runId = serializers.CharField(source="run_id")
    owner = serializers.SerializerMethodField()
    stepIndex = serializers.IntegerField(source="step_index")
    usage = serializers.SerializerMethodField()
    messageCount = serializers.IntegerField(source="message_count")
    lastError = serializers.CharField(source="last_error")
    busy = serializers.SerializerMethodField()
    stop = serializers.SerializerMethodField(
        help_text="The stop asked for (null: none): by whom, why, when, and when it "
        "took effect (null while the leg holding the run has yet to reach its fence)."
    )
    pendingApprovals = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    replayOf = serializers.SerializerMethodField(
        help_text="The run this replays (null: none, or it was deleted): see its "
        "comparison/."
    )
    url = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "runId",
            "agent",
            "owner",
            "title",
            "status",
            "stepIndex",
            "usage",
            "messageCount",
            "lastError",
            "busy",
            "stop",
            "pendingApprovals",
            "forkedFrom",
            "forks",
            "createdAt",
            "updatedAt",
            "replayOf",
            "url",
        ]
        read_only_fields = fields

    def get_owner(self, run: Run) -> str | None:
        return None if run.owner is None else run.owner.get_username()

    @extend_schema_field(USAGE_SCHEMA)
    def get_usage(self, run: Run) -> dict[str, int]:
        return dict(run.usage or {})

    def get_busy(self, run: Run) -> bool:
        """A leg holds the run's lease right now."""
        expires = run.lease_expires_at
        return (
            bool(run.lease_owner) and expires is not None and expires > timezone.now()
        )

    @extend_schema_field(RunStopSerializer(allow_null=True))
    def get_stop(self, run: Run) -> dict[str, Any] | None:
        if run.stop_requested_at is None or run.status == RunStatus.COMPLETED:
            return None  # none asked, or asked as the run completed: never took effect
        return {
            "by": run.stopper,
            "reason": run.stop_reason,
            "requestedAt": run.stop_requested_at,
            "stoppedAt": run.stopped_at,
        }

    @extend_schema_field(ApprovalSerializer(many=True))
    def get_pendingApprovals(self, run: Run) -> Any:
        rows = getattr(run, "pending_rows", None)
        if rows is None:
            rows = run.approvals.filter(status=ApprovalStatus.PENDING).select_related(
                "run", "decided_by"
            )
        return ApprovalSerializer(rows, many=True, context=self.context).data

    def get_replayOf(self, run: Run) -> str | None:
        original = run.replay_of
        return None if original is None else original.run_id

    def get_url(self, run: Run) -> str:
        return str(self.context["run_url"](run.run_id))


def json_bytes(value: Any) -> Any:
    """``value`` with every byte string as standard base64 text."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {key: json_bytes(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_bytes(item) for item in value]
    return value


class MessageSerializer(serializers.ModelSerializer[RunMessage]):
    """One message of a run's history, at its position."""

    message = serializers.SerializerMethodField()

    class Meta:
        model = RunMessage
        fields = ["index", "role", "message"]
        read_only_fields = fields

    @extend_schema_field(MESSAGE_SCHEMA)
    def get_message(self, row: RunMessage) -> Any:
        return json_bytes(decode_json(row.data))


class RunLinkSerializer(serializers.Serializer[Any]):
    """Where to follow a run that is moving on in the background."""

    runId = serializers.CharField()
    detail = serializers.CharField()
    resumeQueued = serializers.BooleanField()
    statusUrl = serializers.URLField()


class StopResultSerializer(serializers.Serializer[Any]):
    """A stop asked for: done (200), or at the holding leg's next fence (202). A
    completed run answers 409 instead, so its status is never ``completed`` — and the
    schema names this choice set apart from the run's (one set under two components
    makes drf-spectacular's deploy check warn, ``drf_spectacular.W001``)."""

    runId = serializers.CharField()
    status = serializers.ChoiceField(
        choices=[c for c in RunStatus.choices if c[0] != RunStatus.COMPLETED]
    )
    detail = serializers.CharField()


class VerdictResultSerializer(RunLinkSerializer):
    decided = ApprovalSerializer(many=True)
