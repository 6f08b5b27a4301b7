"""``runs/{runId}/audit/``: a run's audit records over REST (docs/audit.md) — for whoever
may see the run, oldest first, each with its digests so a client can check them."""

from __future__ import annotations

from django.db.models import Q
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from ..audit.chain import timestamp
from ..audit.export import COLUMNS
from ..models import AuditRecord
from ..models.audit import AuditAction
from . import docs
from .views import DeuzAPIView


class AuditRecordSerializer(serializers.ModelSerializer[AuditRecord]):
    """One audit record: the fields its digest covers, the digest, and who acted."""

    createdAt = serializers.SerializerMethodField(
        help_text="When, in UTC to the microsecond, as the digest covers it."
    )
    action = serializers.CharField(
        help_text="What was done: " + ", ".join(AuditAction.values) + "."
    )
    actor = serializers.CharField(
        help_text="Who acted, for people: a user, an operator, or the system."
    )
    actorId = serializers.CharField(source="actor_id")
    actorName = serializers.CharField(source="actor_name")
    runId = serializers.CharField(source="run_id")
    approvalId = serializers.CharField(source="approval_id")
    details = serializers.JSONField()
    previousDigest = serializers.CharField(source="previous_digest")

    class Meta:
        model = AuditRecord
        fields = ["actor", *COLUMNS]  # an export's columns, and who acted

    def get_createdAt(self, record: AuditRecord) -> str:
        return timestamp(record.created_at)


list_audit = docs.operation(
    operation_id="listRunAudit",
    summary="List a run's audit records",
    description="Every decision, edit, answer, grant, stop, fork, replay, input and "
    "recovery recorded about the run (and its sub-agents' runs), oldest first, each "
    "with the digest of the record before it in the chain and its own. Whoever may see "
    "the run may read them.",
    tags=["runs"],
    parameters=[docs.RUN_ID],
    responses={200: AuditRecordSerializer(many=True), **docs.errors(docs.READ)},
)


class RunAuditView(DeuzAPIView):
    """The run's audit records."""

    serializer_class = AuditRecordSerializer

    @list_audit
    def get(self, request: Request, runId: str) -> Response:
        run_id = self.get_run().run_id
        about = Q(run_id=run_id) | Q(run_id__startswith=f"{run_id}::")
        records = AuditRecord.objects.filter(about).order_by("tenant", "sequence")
        page = self.paginate_queryset(records)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
