"""REST API at the HTTP edge: authentication, CSRF, bodies, throttling, the schema."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client, override_settings
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.validation import validate_schema
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from deuz_django.models import Run
from tests.api.support import (  # noqa: F401
    API,
    approve,
    client,
    deny,
    started,
    verdicts_url,
)

pytestmark = pytest.mark.django_db

MakeUser = Callable[..., User]


ENDPOINTS = [
    ("get", "runs/"),
    ("post", "runs/"),
    ("get", "runs/{run}/"),
    ("get", "runs/{run}/messages/"),
    ("post", "runs/{run}/verdicts/"),
    ("post", "runs/{run}/resume/"),
    ("get", "runs/{run}/inputs/"),
    ("post", "runs/{run}/inputs/"),
    ("get", "runs/{run}/audit/"),
    ("get", "approvals/"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_endpoint_rejects_anonymous_requests(
    run: Run, method: str, path: str
) -> None:
    response = getattr(APIClient(), method)(f"{API}/{path.format(run=run.run_id)}")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_token_authentication(ann: User, run: Run) -> None:
    token = Token.objects.create(user=ann)
    api = APIClient(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert api.get(f"{API}/runs/{run.run_id}/").status_code == 200
    body = {"verdicts": [approve(run, "e1")]}
    assert api.post(verdicts_url(run), body, format="json").status_code == 200
    bad = APIClient(HTTP_AUTHORIZATION="Token nope").get(f"{API}/runs/")
    assert bad.status_code == 401
    assert bad.json()["code"] == "authentication_failed"


def test_session_authentication_requires_the_csrf_token_on_writes(
    ann: User, run: Run
) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(ann)
    assert browser.get(f"{API}/runs/").status_code == 200
    body = json.dumps({"verdicts": [deny("e1")]})
    refused = browser.post(verdicts_url(run), body, content_type="application/json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    assert run.approvals.get(approval_id="e1").status == "pending"
    browser.get("/admin/login/")  # sets the csrftoken cookie
    accepted = browser.post(
        verdicts_url(run),
        body,
        content_type="application/json",
        headers={"X-CSRFToken": browser.cookies["csrftoken"].value},
    )
    assert accepted.status_code == 200


@pytest.mark.parametrize(
    "raw",
    [
        "{",
        '{"verdicts": [}',
        "[" * 100_000,
        '{"verdicts": NaN}',
        '{"verdicts": 1e999}',
        "\udcff",
    ],
)
def test_malformed_json_is_a_400_saying_so(ann: User, run: Run, raw: str) -> None:
    response = client(ann).post(
        verdicts_url(run),
        raw.encode("utf-8", "surrogateescape"),
        content_type="application/json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "parse_error"
    assert body["errors"][0]["field"] == "body"


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
@pytest.mark.parametrize(
    "path", ["runs/", "runs/{run}/verdicts/", "runs/{run}/resume/"]
)
def test_an_oversized_body_is_a_413(ann: User, run: Run, path: str) -> None:
    big = {
        "agent": "scripted",
        "text": "x" * 2000,
        "verdicts": [],
        "denyRemaining": False,
    }
    response = client(ann).post(
        f"{API}/{path.format(run=run.run_id)}", big, format="json"
    )
    assert response.status_code == 413
    assert response.json() == {
        "detail": "The request body is larger than 1000 bytes.",
        "code": "payload_too_large",
        "errors": [{"field": "body", "message": "larger than 1000 bytes"}],
    }
    assert Run.objects.count() == 1


def test_a_body_that_is_not_json_is_a_415(ann: User, run: Run) -> None:
    response = client(ann).post(
        verdicts_url(run),
        "approvalId=e1",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"


def test_an_unknown_path_under_the_api_is_a_json_404(ann: User) -> None:
    response = client(ann).get(f"{API}/nothing/here")
    assert response.status_code == 404
    assert response.json() == {"detail": "No such endpoint.", "code": "not_found"}


def test_an_unsupported_method_is_a_405(ann: User, run: Run) -> None:
    response = client(ann).delete(f"{API}/runs/{run.run_id}/")
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"


@pytest.mark.parametrize(("method", "scope"), [("get", "deuz"), ("post", "deuz.write")])
def test_throttling_is_configured_per_scope(
    settings: Any, ann: User, run: Run, method: str, scope: str
) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {scope: "2/minute"},
    }
    api = client(ann)

    def read() -> int:
        return int(api.get(f"{API}/runs/").status_code)

    def write() -> int:
        return int(
            api.post(verdicts_url(run), [deny("nope")], format="json").status_code
        )

    throttled, free = (read, write) if method == "get" else (write, read)
    assert [throttled() for _ in range(3)][2] == 429
    assert free() != 429
    response = (
        api.get(f"{API}/runs/") if method == "get" else api.post(verdicts_url(run))
    )
    assert response.json()["code"] == "throttled"
    assert int(response["Retry-After"]) > 0


def test_without_rates_nothing_is_throttled(settings: Any, ann: User) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {}}
    api = client(ann)
    assert {api.get(f"{API}/runs/").status_code for _ in range(5)} == {200}


def test_the_openapi_schema_is_served_valid_with_every_error_documented() -> None:
    GENERATOR_STATS.reset()
    response = Client().get(f"{API}/schema/")
    assert response.status_code == 200
    assert not GENERATOR_STATS, "drf-spectacular warned while generating the schema"
    schema = yaml.safe_load(response.content)
    validate_schema(schema)
    assert schema["info"]["title"] == "Deuz API"
    paths = schema["paths"]
    assert set(paths) == {
        f"{API}/runs/",
        f"{API}/runs/{{runId}}/",
        f"{API}/runs/{{runId}}/messages/",
        f"{API}/runs/{{runId}}/verdicts/",
        f"{API}/runs/{{runId}}/resume/",
        f"{API}/runs/{{runId}}/stop/",
        f"{API}/runs/{{runId}}/fork/",
        f"{API}/runs/{{runId}}/replay/",
        f"{API}/runs/{{runId}}/comparison/",
        f"{API}/runs/{{runId}}/inputs/",
        f"{API}/runs/{{runId}}/audit/",
        f"{API}/approvals/",
        f"{API}/delegations/",
        f"{API}/delegations/{{delegationId}}/revoke/",
        f"{API}/agents/{{name}}/ag-ui/",
    }
    # The AG-UI endpoint streams AG-UI's own protocol (tests/protocols check it).
    agui = paths.pop(f"{API}/agents/{{name}}/ag-ui/")["post"]
    assert {"200", "400", "401", "404", "409"} <= set(agui["responses"])
    assert "text/event-stream" in agui["responses"]["200"]["content"]
    for path, operations in paths.items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert {"401", "403", "404", "429"} <= codes, (method, path)
            if method == "post":
                assert {"400", "409", "413", "415"} <= codes, path
            if (
                method == "post"
                and path != f"{API}/delegations/{{delegationId}}/revoke/"
            ):
                assert operation["requestBody"]["content"]["application/json"][
                    "examples"
                ]


def test_the_swagger_page_is_served() -> None:
    assert Client().get(f"{API}/docs/").status_code == 200
