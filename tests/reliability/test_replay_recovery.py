"""A replay's leg SIGKILLed mid-run is recovered like any run's — ``deuz recover`` once its
lease lapsed — and still executes no tool: the recovered leg feeds the recorded outcomes
back as the first one did.

The replay starts in a real ``manage.py deuz replay`` process on the test's own database,
with a one-second lease; it is killed while its model thinks over its second turn.
"""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone

from deuz_django.models import Run, RunStatus
from tests.django.processes import start_manage, wait_until
from tests.django.replay_support import finished
from tests.django.run_support import history

pytestmark = pytest.mark.django_db(transaction=True)

# What the original executed, sorted: its two calls run side by side once approved.
ORIGINAL_EFFECTS = ["echo:hi", "send_email:ann@example.com"]


def _replay_of(original: Run) -> Run | None:
    return Run.objects.filter(replay_of=original).first()


def _past_its_tools(original: Run) -> bool:
    replay = _replay_of(original)
    return replay is not None and replay.step_index == 1


def test_a_killed_replay_leg_is_recovered_and_still_executes_nothing(
    make_user: Callable[..., User],
    effects: Callable[[], list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ann = make_user("ann")
    original = finished(ann)
    assert sorted(effects()) == ORIGINAL_EFFECTS
    leg = start_manage(
        "deuz",
        "replay",
        original.run_id,
        "--agent",
        "mailing_v2",
        "--as",
        "ann",
        DEUZ_LEASE_SECONDS="1",
        DEUZ_TEST_REPLAY_DELAY="60",
    )
    try:
        # Its calls were answered from the record and checkpointed; it now waits on
        # the model's last turn.
        wait_until(lambda: _past_its_tools(original), "the replay's first step")
    finally:
        os.kill(leg.pid, signal.SIGKILL)
        leg.communicate()
    assert leg.returncode == -signal.SIGKILL
    replay = _replay_of(original)
    assert replay is not None
    assert replay.status == RunStatus.RUNNING

    def lapsed() -> bool:
        replay.refresh_from_db()
        expires = replay.lease_expires_at
        return expires is not None and expires < timezone.now()

    wait_until(lapsed, "the dead leg's lease to lapse")
    monkeypatch.delenv("DEUZ_TEST_REPLAY_DELAY", raising=False)
    out = io.StringIO()
    call_command("deuz", "recover", "--older-than", "0", stdout=out)
    assert out.getvalue().strip() == f"recovered {replay.run_id}: completed"
    assert (
        sorted(effects()) == ORIGINAL_EFFECTS
    )  # no tool ran, before or after the crash
    replay.refresh_from_db()
    assert (replay.status, replay.last_error) == (RunStatus.COMPLETED, "")
    roles = [m.role for m in history(replay)]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert history(replay)[-1].text == "Mailed Ann, briefly."
