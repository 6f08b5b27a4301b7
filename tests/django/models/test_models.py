"""The app's tables: migrations in step with the models, and the app's permissions."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_the_migrations_match_the_models() -> None:
    # What CI runs as `manage.py makemigrations --check`.
    call_command("makemigrations", "deuz_django", "--check", "--dry-run", verbosity=0)


def test_the_app_defines_its_decide_and_resume_permissions() -> None:
    codenames = set(
        Permission.objects.filter(content_type__app_label="deuz_django").values_list(
            "codename", flat=True
        )
    )
    assert {"view_run", "decide_approval", "resume_run", "view_approval"} <= codenames
