"""``manage.py deuz input``: steering a run from a shell — output and exit codes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from deuz_django import services
from deuz_django.models import RunInput
from deuz_django.storage import leases
from tests.django.processes import run_manage
from tests.django.run_support import PROMPT

from .test_command import deuz, fails

pytestmark = pytest.mark.django_db


@pytest.fixture
def ann(make_user: Callable[..., Any]) -> Any:
    return make_user("ann")


def started(agent: str, owner: Any) -> str:
    return services.start_run(agent=agent, messages=PROMPT, owner=owner).run_id


def test_input_as_the_owner_is_queued_and_delivered_by_the_next_leg(ann: Any) -> None:
    run_id = started("echoer", ann)
    out = deuz("input", run_id, "Only A-1.", "--as", "ann", "--input-id", "sh-1")
    assert out.strip() == (
        f"Run {run_id}: input 1 queued (sh-1); it is delivered at the run's next "
        "step boundary"
    )
    assert services.resume_run(run_id).status == "completed"
    row = RunInput.objects.get()
    assert (row.text, row.sent_by, row.delivered_at_step) == ("Only A-1.", ann, 0)


def test_an_operators_input_is_recorded_as_such(ann: Any) -> None:
    run_id = started("echoer", ann)
    deuz("input", run_id, "From ops.", "--operator", "oncall")
    assert RunInput.objects.get().sender == "oncall (operator)"


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--as", "eve"], 3, "eve may not send input"),
        (["--as", "nobody"], 2, "No user 'nobody'"),
        (["--operator", " "], 2, "--operator needs a name"),
    ],
)
def test_who_may_not_steer_is_refused(
    ann: Any, make_user: Callable[..., Any], args: list[str], code: int, words: str
) -> None:
    make_user("eve", "deuz_django.view_run", staff=True)
    run_id = started("echoer", ann)
    error = fails("input", run_id, "Hi.", *args)
    assert error.returncode == code
    assert words in str(error)
    assert not RunInput.objects.exists()


def test_a_finished_busy_or_unknown_run_exits_with_1(ann: Any) -> None:
    done = started("echoer", ann)
    services.resume_run(done)
    error = fails("input", done, "More.", "--as", "ann")
    assert (error.returncode, str(error)) == (
        1,
        f"Run '{done}' has completed; start a new one or fork it.",
    )
    busy = started("echoer_reject", ann)
    leases.acquire(busy)
    assert fails("input", busy, "Now.", "--as", "ann").returncode == 1
    assert fails("input", "nope", "Hi.", "--operator", "ops").returncode == 1
    assert fails("input", done, "  ", "--operator", "ops").returncode == 1


def test_blank_text_exits_with_2(ann: Any) -> None:
    run_id = started("echoer", ann)
    assert fails("input", run_id, "  ", "--operator", "ops").returncode == 2


@pytest.mark.django_db(transaction=True)
def test_the_input_command_runs_in_a_real_process(ann: Any) -> None:
    run_id = started("echoer", ann)
    done = run_manage("deuz", "input", run_id, "Hi from a shell.", "--as", "ann")
    assert (done.returncode, done.stderr) == (0, "")
    assert "input 1 queued" in done.stdout
    missing = run_manage("deuz", "input", run_id)
    assert missing.returncode == 2
