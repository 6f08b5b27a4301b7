"""The lazy ``DEUZ`` settings object (DRF's ``api_settings`` pattern)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from deuz_django.conf import DEFAULTS, deuz_settings


def test_a_setting_left_out_takes_its_default() -> None:
    with override_settings(DEUZ={"AGENTS": {}}):
        assert deuz_settings.LEASE_SECONDS == DEFAULTS["LEASE_SECONDS"] == 30
        assert deuz_settings.APPROVAL_MAX_AGE is None
        assert deuz_settings.APPROVAL_FALLBACK_SECRETS == []


def test_changing_the_setting_drops_the_cached_values() -> None:
    assert settings.DEUZ["APPROVAL_MAX_AGE"] == deuz_settings.APPROVAL_MAX_AGE
    with override_settings(DEUZ={**settings.DEUZ, "APPROVAL_MAX_AGE": 5}):
        assert deuz_settings.APPROVAL_MAX_AGE == 5
    assert settings.DEUZ["APPROVAL_MAX_AGE"] == deuz_settings.APPROVAL_MAX_AGE


def test_an_import_string_setting_is_resolved() -> None:
    with override_settings(
        DEUZ={**settings.DEUZ, "STREAM_JOURNAL": "collections.OrderedDict"}
    ):
        from collections import OrderedDict

        assert deuz_settings.STREAM_JOURNAL is OrderedDict


def test_a_setting_renamed_since_0_1_is_read_under_its_old_name() -> None:
    from collections import OrderedDict

    old_only = {k: v for k, v in settings.DEUZ.items() if k != "STREAM_JOURNAL"}
    with override_settings(
        DEUZ={**old_only, "STREAM_STORE": "collections.OrderedDict"}
    ):
        assert deuz_settings.STREAM_JOURNAL is OrderedDict
    both = {
        "STREAM_STORE": "collections.OrderedDict",
        "STREAM_JOURNAL": "builtins.dict",
    }
    with override_settings(DEUZ={**settings.DEUZ, **both}):
        assert deuz_settings.STREAM_JOURNAL is dict  # the new name wins


def test_an_unknown_setting_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Invalid DEUZ setting: 'LEASE_SECOND'"):
        deuz_settings.LEASE_SECOND  # noqa: B018
