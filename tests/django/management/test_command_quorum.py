"""``deuz resume --approve`` on a call that needs two approvals: the first is a vote
(the run waits, and the command says how far the call has got), the second decides."""

from __future__ import annotations

import io
from collections.abc import Callable

from django.contrib.auth.models import Group, User
from django.core.management import call_command

from deuz_django.models import Approval
from deuz_django.runs.continuing import join_handed_off
from tests.django.quorum_agents import FINANCE
from tests.django.run_support import background_leg, suspended

pytestmark = background_leg
MakeUser = Callable[..., User]


def deuz(*args: str) -> str:
    out = io.StringIO()
    call_command("deuz", *args, stdout=out)
    join_handed_off(timeout=60)
    return out.getvalue().strip()


def test_the_first_approval_is_a_vote_and_the_second_resumes(
    make_user: MakeUser,
) -> None:
    finance = Group.objects.create(name=FINANCE)
    for name in ("fin", "fay"):
        user = make_user(name, "deuz_django.view_run", "deuz_django.decide_approval")
        user.groups.add(finance)
    run = suspended("pair", owner=make_user("ann"))
    said = deuz("resume", run.run_id, "--approve", "e1", "--as", "fin")
    assert "1 of 2 approvals" in said
    assert Approval.objects.get(run=run).status == "pending"
    deuz("resume", run.run_id, "--approve", "e1", "--as", "fay")
    run.refresh_from_db()
    assert (Approval.objects.get(run=run).status, run.status) == (
        "approved",
        "completed",
    )
