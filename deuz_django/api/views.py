"""The REST endpoints: runs, their messages, approvals, verdicts, resume, stop, replays and
their comparisons, and starting runs.

Views are thin: :mod:`deuz_django.services` does the work and
:mod:`deuz_django.permissions` decides who may. Runs are looked up through
``Run.objects.for_user``, so a run the user may not see is a 404. Legs never run in the
request: starting or resuming queues a task (``django.tasks``) and answers at once.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from django.http import QueryDict
from django.urls import reverse
from drf_spectacular.openapi import AutoSchema
from rest_framework import generics, status
from rest_framework.metadata import SimpleMetadata
from rest_framework.request import Request
from rest_framework.response import Response

from ..models import Approval, ApprovalStatus, Run, RunMessage, RunQuerySet, RunStatus
from ..runs.recovery import who_continues
from ..runs.replays import compare_replay
from ..services import (
    enqueue_run,
    fork_run,
    record_checked_verdicts,
    replay_run,
    start_run,
    stop_run,
)
from . import docs
from .authentication import authentication_classes
from .batches import check_batch, read_batch
from .comparisons import ComparisonSerializer, comparison_json
from .derived_runs import ForkSerializer, ReplaySerializer
from .exceptions import exception_handler
from .pagination import DeuzPagination
from .parsers import LimitedJSONParser
from .permissions import (
    CanForkRun,
    CanReplayRun,
    CanResumeRun,
    CanViewRun,
    IsActiveUser,
)
from .renderers import DeuzJSONRenderer
from .representations import ApprovalSerializer, MessageSerializer, RunSerializer
from .serializers import (
    ApprovalFilterSerializer,
    ResumeSerializer,
    RunFilterSerializer,
    StartRunSerializer,
    StopSerializer,
)
from .throttling import DeuzRateThrottle


class DeuzMetadata(SimpleMetadata):
    """``OPTIONS`` names the endpoint; its bodies are described by the OpenAPI schema."""

    def determine_actions(self, request: Request, view: Any) -> dict[str, Any]:
        return {}


class DeuzAPIView(generics.GenericAPIView[Any]):
    """Policies every endpoint shares: JSON only, signed-in users, the Deuz error shape
    — named here, so the project's own DRF defaults change nothing of the API (its
    throttle rates aside: :mod:`.throttling`)."""

    permission_classes = [IsActiveUser, CanViewRun]
    renderer_classes = [DeuzJSONRenderer]
    parser_classes = [LimitedJSONParser]
    pagination_class = DeuzPagination
    metadata_class = DeuzMetadata
    schema = AutoSchema()  # drf-spectacular's, whatever DEFAULT_SCHEMA_CLASS says

    def get_authenticators(self) -> list[Any]:
        return [authenticator() for authenticator in authentication_classes()]

    def get_throttles(self) -> list[Any]:
        return [*super().get_throttles(), DeuzRateThrottle()]

    def get_exception_handler(self) -> Any:
        return exception_handler

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "run_url": self.run_url}

    def run_url(self, run_id: str) -> str:
        match = self.request.resolver_match
        assert match is not None  # the URLconf resolved this view
        namespace = match.namespace
        path = reverse(f"{namespace}:run-detail", kwargs={"runId": run_id})
        return self.request.build_absolute_uri(path)

    def visible_runs(self) -> QuerySet[Run]:
        return self._runs().for_user(self.request.user)

    def created(self, run: Run) -> Response:
        """201 with the new run, as the user sees it."""
        run = self.visible_runs().get(pk=run.pk)
        url = self.run_url(run.run_id)
        return Response(
            self.get_serializer(run).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": url},
        )

    def get_run(self) -> Run:
        """The run named in the URL, if the user may see it (and pass the object checks)."""
        run = self._runs().visible(self.request.user, self.kwargs["runId"])
        self.check_object_permissions(self.request, run)
        return run

    @staticmethod
    def _runs() -> RunQuerySet:
        pending = Approval.objects.filter(status=ApprovalStatus.PENDING)
        return Run.objects.select_related(
            "owner", "forked_from", "replay_of"
        ).prefetch_related(
            Prefetch(
                "approvals",
                queryset=pending.select_related("run", "decided_by"),
                to_attr="pending_rows",
            ),
            Prefetch("forks", queryset=Run.objects.order_by("created_at", "pk")),
        )

    def read(self, serializer_class: Any, data: Any) -> dict[str, Any]:
        if isinstance(data, QueryDict):
            # As plain values: a QueryDict would make "?status=" mean "no status".
            data = data.dict()
        serializer = serializer_class(data=data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def link(self, run: Run, detail: str, *, queued: bool, **extra: Any) -> Response:
        """Where to follow the run: 202 when a leg was queued for it, 200 otherwise."""
        url = self.run_url(run.run_id)
        body = {"runId": run.run_id, "detail": detail, "resumeQueued": queued}
        return Response(
            {**body, "statusUrl": url, **extra},
            status=status.HTTP_202_ACCEPTED if queued else status.HTTP_200_OK,
            headers={"Location": url} if queued else None,
        )


class RunListView(DeuzAPIView):
    serializer_class = RunSerializer

    def get_queryset(self) -> QuerySet[Run]:
        filters = self.read(RunFilterSerializer, self.request.query_params)
        return self.visible_runs().filter(**filters)

    @docs.list_runs
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @docs.start_run
    def post(self, request: Request) -> Response:
        data = self.read(StartRunSerializer, request.data)
        run = start_run(
            agent=data["agent"],
            messages=data["history"],
            owner=request.user,
            run_id=data.get("runId"),
            title=data.get("title", ""),
        )
        enqueue_run(run.run_id)
        return self.created(run)


class RunDetailView(DeuzAPIView):
    serializer_class = RunSerializer

    @docs.get_run
    def get(self, request: Request, runId: str) -> Response:
        return Response(self.get_serializer(self.get_run()).data)


class RunMessagesView(DeuzAPIView):
    serializer_class = MessageSerializer

    def get_queryset(self) -> QuerySet[RunMessage]:
        return RunMessage.objects.filter(run=self.get_run()).order_by("index")

    @docs.list_messages
    def get(self, request: Request, runId: str) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class ApprovalListView(DeuzAPIView):
    serializer_class = ApprovalSerializer

    def get_queryset(self) -> QuerySet[Approval]:
        filters = self.read(ApprovalFilterSerializer, self.request.query_params)
        approvals = Approval.objects.filter(
            run__in=Run.objects.for_user(self.request.user),
            status=filters["status"],
        )
        if "runId" in filters:
            approvals = approvals.filter(run__run_id=filters["runId"])
        if "toolName" in filters:
            approvals = approvals.filter(tool_name=filters["toolName"])
        return approvals.select_related(
            "run",
            "decided_by",
            "decided_on_behalf_of",
            "decided_by_rule__created_by",
            "decided_by_grant__created_by",
            "decided_by_grant__run",
            "decided_by_grant__owner",
        ).order_by("created_at", "id")

    @docs.list_approvals
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class RunVerdictsView(DeuzAPIView):
    """Record a batch of verdicts: every one is checked before any is recorded."""

    @docs.post_verdicts
    def post(self, request: Request, runId: str) -> Response:
        run = self.get_run()
        batch = read_batch(request.data)
        checked = check_batch(request.user, run, batch["verdicts"])
        # The verdicts are what continue the run, not the deciders' resume permission:
        # the claim is the system's, as after a decision in the admin.
        recorded = record_checked_verdicts(
            request.user, checked, resume=batch["resume"]
        )
        decided = ApprovalSerializer(
            [d.approval for d in recorded.decisions],
            many=True,
            context=self.get_serializer_context(),
        ).data
        expired = "".join(
            f"{a.approval_id} had expired: it was recorded as expired and will not "
            "run; "
            for a in recorded.expired
        )
        return self.link(
            run,
            f"Verdicts recorded; {expired}{recorded.next_step}.",
            queued=recorded.continued is not None,
            decided=decided,
        )


class RunResumeView(DeuzAPIView):
    permission_classes = [IsActiveUser, CanResumeRun]

    @docs.resume_run
    def post(self, request: Request, runId: str) -> Response:
        run = self.get_run()
        options = self.read(ResumeSerializer, request.data)
        continued = enqueue_run(
            run.run_id,
            user=request.user,
            deny_remaining=options["denyRemaining"],
        )
        return self.link(run, f"Resumed: {who_continues(continued)}.", queued=True)


class RunForkView(DeuzAPIView):
    """Fork a run at one of its steps: a new run, continued in the background."""

    serializer_class = RunSerializer
    permission_classes = [IsActiveUser, CanForkRun]

    @docs.fork_run
    def post(self, request: Request, runId: str) -> Response:
        run = self.get_run()
        options = self.read(ForkSerializer, request.data)
        fork = fork_run(
            run.run_id,
            user=request.user,
            step=options["step"],
            edit=options["edit"],
            with_turn=options["withTurn"],
            fork_run_id=options.get("runId"),
        )
        return self.created(fork)


class RunStopView(DeuzAPIView):
    """Stop a run: at once when no leg holds it, else at that leg's next fence."""

    @docs.stop_run
    def post(self, request: Request, runId: str) -> Response:
        run = self.get_run()
        options = self.read(StopSerializer, request.data)
        stopped = stop_run(run.run_id, user=request.user, reason=options["reason"])
        detail = (
            "The run is stopped."
            if stopped.status == RunStatus.STOPPED
            else "The run stops before its next model call or tool execution."
        )
        return Response(
            {"runId": stopped.run_id, "status": stopped.status, "detail": detail},
            status=status.HTTP_200_OK
            if stopped.status == RunStatus.STOPPED
            else status.HTTP_202_ACCEPTED,
        )


class RunReplayView(DeuzAPIView):
    """Replay a finished run as a new run of the user's, started in the background."""

    serializer_class = RunSerializer
    permission_classes = [IsActiveUser, CanReplayRun]

    @docs.replay_run
    def post(self, request: Request, runId: str) -> Response:
        run = self.get_run()
        options = self.read(ReplaySerializer, request.data)
        replay = replay_run(
            run.run_id,
            user=request.user,
            agent=options.get("agent"),
            system=options.get("system"),
        )
        replay = self.visible_runs().get(pk=replay.pk)
        return Response(
            self.get_serializer(replay).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": self.run_url(replay.run_id)},
        )


class RunComparisonView(DeuzAPIView):
    """A replay beside its original, step by step."""

    serializer_class = ComparisonSerializer

    @docs.get_comparison
    def get(self, request: Request, runId: str) -> Response:
        return Response(comparison_json(compare_replay(request.user, self.get_run())))
