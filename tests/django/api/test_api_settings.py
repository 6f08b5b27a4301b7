"""The API names its own schema class and authentication: a project's DRF defaults —
none at all, or ones made for its own API — change nothing of it."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

API = "/api/deuz"
BARE_DRF = {"DEFAULT_THROTTLE_RATES": {}}  # no schema class, no authentication
# A project whose own API uses something else entirely.
OTHER_DRF = {
    **BARE_DRF,
    "DEFAULT_SCHEMA_CLASS": "rest_framework.schemas.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
}


@pytest.mark.parametrize("drf", [BARE_DRF, OTHER_DRF], ids=["bare", "other"])
def test_the_schema_and_the_api_do_not_depend_on_the_projects_drf_defaults(
    drf: dict[str, Any], make_user: Any
) -> None:
    ann: User = make_user("ann")
    token = Token.objects.create(user=ann)
    with override_settings(REST_FRAMEWORK=drf):
        assert Client().get(f"{API}/schema/").status_code == 200
        api = APIClient()
        assert api.get(f"{API}/runs/").status_code == 401  # token auth: 401, not 403
        api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        assert api.get(f"{API}/runs/").status_code == 200  # not only admins
        browser = Client()
        browser.force_login(ann)
        assert browser.get(f"{API}/runs/").status_code == 200  # the session too


def test_a_project_may_name_the_apis_authentication(make_user: Any) -> None:
    make_user("ann")
    basic = ["rest_framework.authentication.BasicAuthentication"]
    with override_settings(DEUZ={**settings.DEUZ, "API_AUTHENTICATION_CLASSES": basic}):
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION="Basic YW5uOnB3")  # ann:pw
        assert api.get(f"{API}/runs/").status_code == 200
        browser = Client()
        browser.force_login(User.objects.get(username="ann"))
        assert browser.get(f"{API}/runs/").status_code == 401  # no session here


@pytest.mark.parametrize("drf", [BARE_DRF, OTHER_DRF], ids=["bare", "other"])
def test_drf_spectacular_deploy_check_passes_whatever_the_projects_drf_defaults(
    drf: dict[str, Any],
) -> None:
    from drf_spectacular.checks import schema_check
    from drf_spectacular.drainage import GENERATOR_STATS

    GENERATOR_STATS.reset()  # what earlier generations in this process reported
    with override_settings(REST_FRAMEWORK=drf):
        assert [(error.id, error.msg) for error in schema_check(None)] == []
