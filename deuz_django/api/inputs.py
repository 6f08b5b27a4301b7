"""``runs/{runId}/inputs/``: steering a run over REST — send it input while it runs or
waits, and list what it was sent, queued or delivered (docs/steering.md).

The WebSocket's ``input`` frame is read with :class:`SendInputSerializer` too.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from ..core.durable import QueuedInput
from ..models import RunInput
from ..services import send_input
from . import docs
from .serializers import TEXT_VALIDATORS, RunIdField, StrictCharField
from .views import DeuzAPIView

MAX_INPUT_LENGTH = 32_768

# An input waits for a step boundary, then a boundary delivered it (its own enum in the
# schema: "status" names the run's and the approval's choices too).
INPUT_STATUSES = ["queued", "delivered"]


class SendInputSerializer(serializers.Serializer[Any]):
    """An input for a run; ``inputId`` (yours to choose) makes a retry safe."""

    text = StrictCharField(
        max_length=MAX_INPUT_LENGTH,
        validators=list(TEXT_VALIDATORS),
        help_text="What to tell the run; it reaches the model as a user message.",
    )
    inputId = RunIdField(
        required=False,
        help_text="Your id for this input (letters, digits, '_', '-'): sent again, the "
        "input accepted under it is returned and nothing is queued twice.",
    )

    def validate_text(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("This field may not be blank.", "blank")
        return value


class InputQueuedSerializer(serializers.Serializer[Any]):
    """An accepted input: durable, and delivered at the run's next step boundary."""

    inputId = serializers.CharField()
    seq = serializers.IntegerField(help_text="Its place in the run's queue, from 1.")
    status = serializers.ChoiceField(choices=INPUT_STATUSES)


class RunInputSerializer(serializers.ModelSerializer[RunInput]):
    """An input of the run: queued, or delivered before the model call of ``step``."""

    inputId = serializers.CharField(source="input_id")
    status = serializers.SerializerMethodField()
    step = serializers.IntegerField(source="delivered_at_step", allow_null=True)
    acceptedAt = serializers.DateTimeField(source="accepted_at")
    deliveredAt = serializers.DateTimeField(source="delivered_at", allow_null=True)
    sentBy = serializers.CharField(source="sender", help_text="A user, or an operator.")

    class Meta:
        model = RunInput
        fields = [
            "inputId",
            "seq",
            "text",
            "status",
            "step",
            "acceptedAt",
            "deliveredAt",
            "sentBy",
        ]

    def get_status(self, row: RunInput) -> str:
        return "queued" if row.delivered_at_step is None else "delivered"


def queued_body(queued: QueuedInput) -> dict[str, Any]:
    """What accepting an input answers, over REST and the WebSocket alike."""
    return {
        "inputId": queued.input_id,
        "seq": queued.seq,
        "status": "delivered" if queued.delivered else "queued",
    }


list_inputs = docs.operation(
    operation_id="listRunInputs",
    summary="List a run's inputs",
    description="What people sent the run while it ran or waited, in the order the run "
    "accepted it: `queued` until a step boundary delivers it, then `delivered` with "
    "the step whose model call first saw it.",
    tags=["runs"],
    parameters=[docs.RUN_ID],
    responses={200: RunInputSerializer(many=True), **docs.errors(docs.READ)},
)

post_input = docs.operation(
    operation_id="sendRunInput",
    summary="Send input to a run",
    description="Queue a message for a run that is running or waits for a person: it is "
    "durable once this answers (202) and reaches the model as a user message at the "
    "run's next step boundary — after the tool calls in progress, never in the middle "
    "of one. An agent with `steering='interrupt'` cuts its model's answer in progress "
    "short to take it at once; one with `steering='reject'` refuses input while it "
    "runs (409 `input_rejected`). A waiting run keeps the input until a verdict "
    "continues it. Who may resume the run may send it input. A completed or stopped "
    "run refuses it (409 `run_not_steerable`).",
    tags=["runs"],
    parameters=[docs.RUN_ID],
    request=SendInputSerializer,
    responses={202: InputQueuedSerializer, **docs.errors(docs.WRITE)},
    examples=[
        OpenApiExample(
            "Input",
            value={"text": "Use the EU warehouse instead.", "inputId": "msg-7"},
            request_only=True,
        ),
        OpenApiExample(
            "Queued",
            value={"inputId": "msg-7", "seq": 3, "status": "queued"},
            response_only=True,
            status_codes=[202],
        ),
    ],
)


class RunInputsView(DeuzAPIView):
    """The run's inputs; posting one steers the run."""

    serializer_class = RunInputSerializer

    @list_inputs
    def get(self, request: Request, runId: str) -> Response:
        inputs = RunInput.objects.filter(run=self.get_run()).select_related("sent_by")
        page = self.paginate_queryset(inputs.order_by("seq"))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @post_input
    def post(self, request: Request, runId: str) -> Response:
        run = self.get_run()
        body = self.read(SendInputSerializer, request.data)
        queued = send_input(
            run.run_id, body["text"], user=request.user, input_id=body.get("inputId")
        )
        return Response(queued_body(queued), status=status.HTTP_202_ACCEPTED)
