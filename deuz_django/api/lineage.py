"""A run's lineage as the API writes it: the run it was forked from, and the forks made
of it — only runs the reader may see (another user's run is never named)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import Run
from ..permissions import can_view_run


class ForkOriginSerializer(serializers.Serializer[Any]):
    """Where a fork came from: the run, the step, and what it changed there."""

    runId = serializers.CharField(help_text="The run it was forked from.")
    step = serializers.IntegerField(help_text="The step it was forked at.")
    withTurn = serializers.BooleanField(
        help_text="Whether it kept that step's model turn."
    )
    edit = serializers.JSONField(
        allow_null=True,
        help_text='The edit made there: {"message": …} or {"toolCallId": …, '
        '"input": …}; null: none.',
    )


class ForkLineage(serializers.Serializer[Any]):
    """``forkedFrom`` and ``forks``, for the run representation (its ``run.forks`` may
    be prefetched)."""

    forkedFrom = serializers.SerializerMethodField(
        help_text="The run this one was forked from (null: not a fork, or a run you "
        "may not see)."
    )
    forks = serializers.SerializerMethodField(
        help_text="The run ids of the forks made of this run that you may see, oldest "
        "first."
    )

    @extend_schema_field(ForkOriginSerializer(allow_null=True))
    def get_forkedFrom(self, run: Run) -> dict[str, Any] | None:
        origin = run.forked_from
        if origin is None or not can_view_run(self._viewer(), origin):
            return None
        return {
            "runId": origin.run_id,
            "step": run.forked_at_step,
            "withTurn": run.forked_with_turn,
            "edit": run.fork_edit,
        }

    def get_forks(self, run: Run) -> list[str]:
        viewer = self._viewer()
        return [f.run_id for f in run.forks.all() if can_view_run(viewer, f)]

    def _viewer(self) -> Any:
        request = self.context.get("request")
        return None if request is None else request.user
