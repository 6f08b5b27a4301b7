"""The API's routes: ``path("api/deuz/", include("deuz_django.api.urls"))``.

Any other path under the prefix answers with a JSON 404, so clients never get an HTML page.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from django.apps import apps
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, URLResolver, include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.settings import patched_settings
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from ..protocols.agui.views import agent_endpoint
from ..streaming.sse import run_stream
from . import audit, delegations, inputs, views
from .docs import operation

app_name = "deuz"

SCHEMA_SETTINGS: dict[str, Any] = {
    "TITLE": "Deuz API",
    "DESCRIPTION": "Durable AI-agent runs with humans in the loop: runs, their messages, "
    "approvals, signed verdicts, resume, forks, replays, steering, delegations and the "
    "audit trail. "
    "Every registered "
    "agent also speaks A2A v1.0 (HTTP+JSON binding) under `a2a/{agent}/`: its Agent "
    "Card at `a2a/{agent}/.well-known/agent-card.json`, then `message:send`, "
    "`message:stream`, `tasks`, `tasks/{id}`, `tasks/{id}:cancel`, "
    "`tasks/{id}:subscribe` and `tasks/{id}/pushNotificationConfigs`, with the same "
    "authentication (see the A2A page of the "
    "documentation).",
    "VERSION": "1",
    "PREPROCESSING_HOOKS": ["deuz_django.api.schema.only_deuz_endpoints"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "deuz_django.protocols.agui.schema.add_agui_endpoint",
    ],
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "deuz_django.models.RunStatus",
        "ApprovalStatusEnum": "deuz_django.models.ApprovalStatus",
        "InputStatusEnum": "deuz_django.api.inputs.INPUT_STATUSES",
    },
}


# Swagger UI from drf-spectacular-sidecar's static files: no CDN, the version pinned.
SIDECAR_SETTINGS = {"SWAGGER_UI_DIST": "SIDECAR", "SWAGGER_UI_FAVICON_HREF": "SIDECAR"}


class DocsView(SpectacularSwaggerView):
    """Swagger UI for the schema, served by the project itself when
    ``drf_spectacular_sidecar`` is installed (drf-spectacular's default loads the latest
    Swagger UI from a CDN: a blank page offline, and a version nobody chose)."""

    title = SCHEMA_SETTINGS["TITLE"]
    schema = AutoSchema()

    @operation(exclude=True)
    def get(self, request: Any, *args: Any, **kwargs: Any) -> HttpResponse:
        local = apps.is_installed("drf_spectacular_sidecar")
        with patched_settings(SIDECAR_SETTINGS if local else None):
            response: HttpResponse = super().get(request, *args, **kwargs)
        return response


class SchemaView(SpectacularAPIView):
    """The schema itself, on drf-spectacular's ``AutoSchema`` like every view here: under
    DRF's default schema class, drf-spectacular's deploy check (``drf_spectacular.E001``)
    fails on this view in a project that never configured DRF."""

    schema = AutoSchema()

    @operation(exclude=True)
    def get(self, request: Any, *args: Any, **kwargs: Any) -> HttpResponse:
        response: HttpResponse = super().get(request, *args, **kwargs)
        return response


@csrf_exempt  # it changes nothing: a POST with a session cookie gets this JSON 404 too
def not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    return JsonResponse(
        {"detail": "No such endpoint.", "code": "not_found"}, status=404
    )


urlpatterns: list[URLPattern | URLResolver] = [
    path("runs/", views.RunListView.as_view(), name="run-list"),
    path("runs/<str:runId>/", views.RunDetailView.as_view(), name="run-detail"),
    path(
        "runs/<str:runId>/messages/",
        views.RunMessagesView.as_view(),
        name="run-messages",
    ),
    path(
        "runs/<str:runId>/verdicts/",
        views.RunVerdictsView.as_view(),
        name="run-verdicts",
    ),
    path("runs/<str:runId>/resume/", views.RunResumeView.as_view(), name="run-resume"),
    path("runs/<str:runId>/stop/", views.RunStopView.as_view(), name="run-stop"),
    path("runs/<str:runId>/fork/", views.RunForkView.as_view(), name="run-fork"),
    path("runs/<str:runId>/replay/", views.RunReplayView.as_view(), name="run-replay"),
    path(
        "runs/<str:runId>/comparison/",
        views.RunComparisonView.as_view(),
        name="run-comparison",
    ),
    path("runs/<str:runId>/inputs/", inputs.RunInputsView.as_view(), name="run-inputs"),
    path("runs/<str:runId>/audit/", audit.RunAuditView.as_view(), name="run-audit"),
    # The Deuz UI wire v2 (SSE), for the original TypeScript client; see deuz_django.streaming.sse.
    path("runs/<str:run_id>/stream", run_stream, name="run-stream"),
    path("approvals/", views.ApprovalListView.as_view(), name="approval-list"),
    # AG-UI 1.0 (SSE) for CopilotKit and other front ends; see deuz_django.protocols.agui.
    path("agents/<str:name>/ag-ui/", agent_endpoint, name="agent-ag-ui"),
    path(
        "delegations/",
        delegations.DelegationsView.as_view(),
        name="delegation-list",
    ),
    path(
        "delegations/<int:delegationId>/revoke/",
        delegations.DelegationRevokeView.as_view(),
        name="delegation-revoke",
    ),
    path(
        "schema/",
        SchemaView.as_view(custom_settings=SCHEMA_SETTINGS),
        name="schema",
    ),
    path("docs/", DocsView.as_view(url_name="deuz:schema"), name="docs"),
    re_path(r"^(?P<rest>.*)$", not_found),
]

# A2A v1.0 (HTTP+JSON binding), one agent at a time (deuz_django.protocols.a2a): served
# when the ``a2a`` extra (the official SDK) is installed.
if find_spec("a2a") is not None:
    urlpatterns.insert(-1, path("a2a/", include("deuz_django.protocols.a2a.urls")))
