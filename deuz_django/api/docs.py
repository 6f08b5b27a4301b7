"""The OpenAPI description of each endpoint: request and response bodies, every error an
endpoint can answer with, and examples (drf-spectacular ``extend_schema``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)

from . import examples
from .comparisons import ComparisonSerializer
from .derived_runs import ForkSerializer, ReplaySerializer
from .exceptions import ErrorSerializer
from .representations import (
    ApprovalSerializer,
    MessageSerializer,
    RunLinkSerializer,
    RunSerializer,
    StopResultSerializer,
    VerdictResultSerializer,
)
from .serializers import (
    ApprovalFilterSerializer,
    ResumeSerializer,
    RunFilterSerializer,
    StartRunSerializer,
    StopSerializer,
    VerdictBatchSerializer,
    VerdictSerializer,
)


def operation(**documentation: Any) -> Callable[[Any], Any]:
    """drf-spectacular's ``extend_schema`` on its own ``AutoSchema``: by default the
    decorator builds on ``DEFAULT_SCHEMA_CLASS`` as it reads when a view is decorated,
    and the API must not depend on how the project set up DRF."""
    extend = extend_schema(**documentation)

    def decorate(view_method: Any) -> Any:
        view_method.schema = AutoSchema  # the base extend_schema builds on
        return extend(view_method)

    return decorate


READ = (400, 401, 403, 404, 429)
WRITE = (400, 401, 403, 404, 409, 413, 415, 429)


def errors(
    codes: tuple[int, ...], overrides: dict[int, dict[str, Any]] | None = None
) -> dict[int, OpenApiResponse]:
    """The error responses ``codes``, each with an example (``overrides`` replaces it)."""
    responses = {}
    for code in codes:
        description, example = examples.ERRORS[code]
        example = (overrides or {}).get(code, example)
        responses[code] = OpenApiResponse(
            ErrorSerializer,
            description=description,
            examples=[OpenApiExample(f"{code}", value=example, status_codes=[code])],
        )
    return responses


RUN_ID = OpenApiParameter(
    "runId", OpenApiTypes.STR, OpenApiParameter.PATH, description="The run's id."
)


list_runs = operation(
    operation_id="listRuns",
    summary="List runs",
    description="The root runs you may see (your own; every run with "
    "`deuz_django.view_run`), most recently active first.",
    tags=["runs"],
    parameters=[RunFilterSerializer],
    responses={200: RunSerializer(many=True), **errors(READ)},
    examples=[OpenApiExample("Runs", value=examples.RUN, response_only=True)],
)

start_run = operation(
    operation_id="startRun",
    summary="Start a run",
    description="Record a run of a registered agent with its input; the first leg runs in "
    "a background task. `text` is a shorthand for a last user message.",
    tags=["runs"],
    request=StartRunSerializer,
    responses={201: RunSerializer, **errors(WRITE, {400: examples.BAD_MESSAGE})},
    examples=[
        OpenApiExample(
            "Text", value={"agent": "assistant", "text": "Hello!"}, request_only=True
        ),
        OpenApiExample(
            "Messages",
            value={
                "agent": "assistant",
                "runId": "run-42",
                "title": "Greeting",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Hi"}]}
                ],
            },
            request_only=True,
        ),
        OpenApiExample(
            "Started", value=examples.RUN, response_only=True, status_codes=[201]
        ),
    ],
)

get_run = operation(
    operation_id="getRun",
    summary="Get a run",
    tags=["runs"],
    parameters=[RUN_ID],
    responses={200: RunSerializer, **errors(READ)},
    examples=[OpenApiExample("Suspended", value=examples.RUN, response_only=True)],
)

list_messages = operation(
    operation_id="listRunMessages",
    summary="A run's messages",
    description="The run's history in Deuz's JSON form, oldest first. Byte strings "
    "(image data) are standard base64 text.",
    tags=["runs"],
    parameters=[RUN_ID],
    responses={200: MessageSerializer(many=True), **errors(READ)},
    examples=[
        OpenApiExample(
            "A tool call",
            value={
                "index": 1,
                "role": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "e1",
                            "name": "send_email",
                            "input": {"to": "ann@example.com"},
                        }
                    ],
                },
            },
            response_only=True,
        )
    ],
)

list_approvals = operation(
    operation_id="listApprovals",
    summary="List approvals",
    description="Approvals of the runs you may see, oldest first; pending ones unless "
    "`status` says otherwise. A pending approval carries the token an approving "
    "verdict must echo, and its `deadline`: when it times out (recorded `expired` "
    "with the reason the model is told, and the run goes on) or, with `escalateTo`, "
    "goes to more people first.",
    tags=["approvals"],
    parameters=[ApprovalFilterSerializer],
    responses={200: ApprovalSerializer(many=True), **errors(READ)},
    examples=[OpenApiExample("Pending", value=examples.APPROVAL, response_only=True)],
)

post_verdicts = operation(
    operation_id="postVerdicts",
    summary="Decide approvals",
    description="Record verdicts for a run's approvals: all of them or none. Each is "
    "checked first — the approval exists and is pending, you may decide it, and an "
    "approving verdict's token verifies (signature, pinned call, this run, age). When "
    "no approval is left undecided the run resumes in the background (202) unless "
    "`resume` is false. The body is an object, or just the list of verdicts. An "
    "approving verdict may `allow` the tool's later calls — for the rest of the run, or "
    "for the run owner's runs for some hours — as a grant that approves them "
    "automatically with your rights.",
    tags=["approvals"],
    parameters=[RUN_ID],
    request=PolymorphicProxySerializer(
        component_name="VerdictRequest",
        serializers=[VerdictBatchSerializer, VerdictSerializer(many=True)],
        resource_type_field_name=None,
        many=False,
    ),
    responses={
        200: VerdictResultSerializer,
        202: VerdictResultSerializer,
        **errors(WRITE, {400: examples.BAD_TOKEN, 403: examples.OWN_CALL}),
    },
    examples=[
        OpenApiExample(
            "Approve and deny",
            value={
                "verdicts": [
                    {"approvalId": "e1", "approved": True, "token": examples.TOKEN},
                    {"approvalId": "r1", "approved": False, "reason": "Not today."},
                ],
                "resume": True,
            },
            request_only=True,
        ),
        OpenApiExample(
            "Approve, and allow later calls for a day",
            value={
                "verdicts": [
                    {
                        "approvalId": "e1",
                        "approved": True,
                        "token": examples.TOKEN,
                        "allow": {"scope": "owner", "hours": 24},
                    }
                ]
            },
            request_only=True,
        ),
        OpenApiExample(
            "Recorded, resuming",
            value={
                **examples.LINK,
                "detail": "Verdicts recorded; the run resumes: it is queued for a worker "
                "(DatabaseBackend); if no worker starts it within 30 s, this server's "
                "recovery sweep continues it.",
                "decided": [],
            },
            response_only=True,
            status_codes=[202],
        ),
    ],
)

resume_run = operation(
    operation_id="resumeRun",
    summary="Resume a run",
    description="Queue the run's next leg. Refused (409) while another leg runs, when the "
    "run is completed, or while approvals are undecided — unless `denyRemaining` is "
    "true, which denies them first.",
    tags=["runs"],
    parameters=[RUN_ID],
    request=ResumeSerializer,
    responses={202: RunLinkSerializer, **errors(WRITE, {409: examples.UNDECIDED})},
    examples=[
        OpenApiExample(
            "Deny the rest", value={"denyRemaining": True}, request_only=True
        ),
        OpenApiExample(
            "Queued", value=examples.LINK, response_only=True, status_codes=[202]
        ),
    ],
)

stop_run = operation(
    operation_id="stopRun",
    summary="Stop a run",
    description="Stop the run for good: at once (200) when no leg holds it — the calls it "
    "waits on are cancelled — or before the next model call or tool execution of the "
    "leg that holds it, in whichever process (202). Never mid-tool. The owner may stop "
    "their own run; others need `deuz_django.stop_run`. Refused (409) for a run that is "
    "completed or stopped already; asking again while a stop is pending changes nothing.",
    tags=["runs"],
    parameters=[RUN_ID],
    request=StopSerializer,
    responses={
        200: StopResultSerializer,
        202: StopResultSerializer,
        **errors(WRITE),
    },
    examples=[
        OpenApiExample(
            "Why",
            value={"reason": "It keeps emailing the customer."},
            request_only=True,
        ),
        OpenApiExample(
            "Stopped",
            value={
                "runId": "run-42",
                "status": "stopped",
                "detail": "The run is stopped.",
            },
            response_only=True,
            status_codes=[200],
        ),
    ],
)

fork_run = operation(
    operation_id="forkRun",
    summary="Fork a run",
    description="A new run from a step of this one (201), continued in the background. "
    "It starts from the history that step's model call answered: the model is asked "
    "again (an `edit.message` replaces the user message that started the step) or, "
    "with `withTurn`, the step's recorded turn is kept (an `edit` may change one "
    "call's `input`, checked against its tool's schema) and its calls go through the "
    "gates again. Calls the run recorded outcomes for are never executed again; "
    "approvals are not inherited — a gated call is asked again, with tokens bound to "
    "the fork. The fork is yours; its usage starts at zero. The owner may fork their "
    "own run; others need `deuz_django.fork_run`. A taken `runId` is 409.",
    tags=["runs"],
    parameters=[RUN_ID],
    request=ForkSerializer,
    responses={
        201: RunSerializer,
        **errors(WRITE, {400: examples.BAD_FORK}),
    },
    examples=[
        OpenApiExample(
            "Ask differently",
            value={"step": 0, "edit": {"message": "Email Bob instead."}},
            request_only=True,
        ),
        OpenApiExample(
            "Correct the agent",
            value={
                "step": 1,
                "withTurn": True,
                "edit": {"toolCallId": "e1", "input": {"to": "bob@example.com"}},
            },
            request_only=True,
        ),
        OpenApiExample(
            "Forked", value=examples.FORK, response_only=True, status_codes=[201]
        ),
    ],
)
replay_run = operation(
    operation_id="replayRun",
    summary="Replay a run",
    description="Replay a completed or stopped run — with another registered `agent` "
    "(a new model or version) and/or another `system` prompt — as a new run of yours "
    "that starts in the background. The replay executes no tool and asks nobody to "
    "approve anything: each call gets the original's recorded outcome of the same "
    "call (same tool, same input; in order when it was made several times). A call "
    "the original never made is not executed: the replay stops there and says so "
    "(`stop`). The owner may replay their own run; others need "
    "`deuz_django.replay_run`. Refused (409) for a run that is not finished.",
    tags=["runs"],
    parameters=[RUN_ID],
    request=ReplaySerializer,
    responses={201: RunSerializer, **errors(WRITE)},
    examples=[
        OpenApiExample(
            "Another agent and prompt",
            value={"agent": "assistant_v2", "system": "Answer in one sentence."},
            request_only=True,
        ),
        OpenApiExample(
            "Started", value=examples.REPLAY, response_only=True, status_codes=[201]
        ),
    ],
)

get_comparison = operation(
    operation_id="getRunComparison",
    summary="Compare a replay with its original",
    description="The replay's transcript and its original's, step by step — each "
    "step's assistant text and tool calls with their inputs and results — with what "
    "differs marked: the first divergence, changed texts, calls made on one side "
    "only. A replay that diverged shows the call it stopped on, unanswered. 404 for "
    "a run that is no replay (or whose original was deleted or is not yours to see).",
    tags=["runs"],
    parameters=[RUN_ID],
    responses={200: ComparisonSerializer, **errors(READ)},
    examples=[
        OpenApiExample("Diverged", value=examples.COMPARISON, response_only=True)
    ],
)
