"""The fork service: a fork re-runs none of its parent's recorded tools, asks again for
every gated call with tokens bound to it, takes an edit, forks sub-agent runs with it,
and follows the permission rules (issue #30)."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django import services
from deuz_django.core.durable import ForkEdit, InvalidForkError, child_run_id
from deuz_django.exceptions import InvalidVerdict, NotPermitted, RunExists, RunNotFound
from deuz_django.models import Run
from deuz_django.runs.continuing import join_handed_off
from tests.django.fork_support import PARENT_EFFECTS, asking, finished, pending
from tests.django.run_support import PROMPT, background_leg, history, tool_results

pytestmark = background_leg  # a fork's first leg runs in the background


def forked(parent: Run, user: Any, step: int, **options: Any) -> Run:
    """The fork, once its first leg ended."""
    fork = services.fork_run(parent.run_id, user=user, step=step, **options)
    join_handed_off(timeout=60)
    fork.refresh_from_db()
    return fork


def test_a_fork_with_the_turn_re_executes_none_of_the_parents_tools(
    ann: Any, effects: Any
) -> None:
    parent = finished(ann)
    fork = forked(parent, ann, 2, with_turn=True)
    assert fork.status == "completed"
    assert sorted(effects()) == PARENT_EFFECTS  # 0 new executions
    assert tool_results(fork)["f4"] == ("three", False)
    assert history(fork)[-1].text == "Done: Tidy up."


def test_a_gated_call_of_the_kept_turn_is_asked_again_on_the_fork(
    ann: Any, effects: Any
) -> None:
    parent = finished(ann)
    fork = forked(parent, ann, 1, with_turn=True)
    assert fork.status == "suspended"
    asked = pending(fork)
    assert (asked.tool_call_id, asked.run_id) == ("f2", fork.pk)
    services.decide_approval(asked, user=ann, approved=True, token=asked.token)
    assert services.resume_run(fork.run_id).status == "completed"
    # f2 and f3 ran in the parent: reused. Step 2 is the fork's own (after the point).
    assert sorted(effects()) == sorted([*PARENT_EFFECTS, "echo:three"])


def test_a_token_of_the_parents_approval_is_refused_on_the_fork(ann: Any) -> None:
    parent = asking(ann)
    token = pending(parent).token
    fork = forked(parent, ann, 1, with_turn=True)
    with pytest.raises(InvalidVerdict):
        services.decide_approval(pending(fork), user=ann, approved=True, token=token)
    assert pending(parent).status == "pending"  # the parent's ask is its own


def test_an_edited_message_reaches_the_model(ann: Any, effects: Any) -> None:
    parent = finished(ann)
    fork = forked(parent, ann, 0, edit=ForkEdit(message="Tidy up differently."))
    assert [m.text for m in history(fork) if m.role == "user"] == [
        "Tidy up differently."
    ]
    assert effects()[len(PARENT_EFFECTS) :] == ["echo:Tidy up differently."]
    assert history(parent)[0].text == "Tidy up."


def test_an_edited_input_runs_and_its_gated_call_is_asked_with_it(
    ann: Any, effects: Any
) -> None:
    parent = asking(ann)
    edit = ForkEdit(tool_call_id="f2", input={"to": "bob@example.com"})
    fork = forked(parent, ann, 1, with_turn=True, edit=edit)
    asked = pending(fork)
    assert asked.input == {"to": "bob@example.com"}
    services.decide_approval(asked, user=ann, approved=True, token=asked.token)
    assert services.resume_run(fork.run_id).status == "completed"
    assert "send_email:bob@example.com" in effects()
    assert "send_email:ann@example.com" not in effects()


def test_an_edited_input_the_tools_schema_refuses_writes_nothing(ann: Any) -> None:
    parent = asking(ann)
    edit = ForkEdit(tool_call_id="f2", input={"to": 5})
    with pytest.raises(InvalidForkError) as refused:
        services.fork_run(parent.run_id, user=ann, step=1, with_turn=True, edit=edit)
    assert refused.value.problem.field == "edit.input"
    assert "to" in refused.value.problem.message
    assert Run.objects.count() == 1


def test_a_sub_agent_run_forks_with_its_parent(ann: Any, effects: Any) -> None:
    parent = services.start_run(agent="nested", messages=PROMPT, owner=ann)
    assert services.resume_run(parent.run_id).status == "suspended"
    fork = forked(parent, ann, 0, with_turn=True)
    asked = pending(fork)
    assert (asked.tool_call_id, asked.agent_path) == ("x1", ["researcher"])
    child = Run.objects.get(run_id=child_run_id(fork.run_id, "researcher", "p1"))
    assert child.parent == fork
    services.decide_approval(asked, user=ann, approved=True, token=asked.token)
    assert services.resume_run(fork.run_id).status == "completed"
    assert effects() == ["send_email:bob@example.com"]
    assert Run.objects.get(pk=parent.pk).status == "suspended"


def test_forking_follows_the_permission_rules(make_user: Any, ann: Any) -> None:
    parent = asking(ann)
    bob = make_user("bob")
    viewer = make_user("viewer", "deuz_django.view_run", staff=True)
    forker = make_user(
        "forker", "deuz_django.view_run", "deuz_django.fork_run", staff=True
    )
    with pytest.raises(NotPermitted):
        services.fork_run(parent.run_id, user=None, step=1)
    with pytest.raises(RunNotFound):
        services.fork_run(parent.run_id, user=bob, step=1)
    with pytest.raises(NotPermitted):
        services.fork_run(parent.run_id, user=viewer, step=1)
    fork = forked(parent, forker, 1, fork_run_id="forked-by-staff")
    assert (fork.owner, fork.forked_from) == (forker, parent)
    with pytest.raises(RunExists):
        services.fork_run(parent.run_id, user=ann, step=1, fork_run_id=fork.run_id)
    operator = forked(parent, None, 1, operator="ops")
    assert operator.owner == ann
