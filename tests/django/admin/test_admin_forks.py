"""The run page's "Fork from here" at each step of the transcript, the view it posts
to (under the fork permission), and the lineage both ways."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from deuz_django.models import Run
from deuz_django.runs.continuing import join_handed_off
from tests.django.admin_support import VIEWER, messages_of, run_url
from tests.django.fork_support import asking, finished, pending
from tests.django.run_support import background_leg, history

pytestmark = background_leg
MakeUser = Callable[..., User]
FORKER = (*VIEWER, "deuz_django.fork_run")


def fork_url(run: Run) -> str:
    return reverse("admin:deuz_django_run_fork", args=[run.pk])


def post(client: Client, run: Run, **form: Any) -> Any:
    response = client.post(fork_url(run), form, follow=True)
    join_handed_off(timeout=60)
    return response


def test_each_step_of_the_transcript_offers_fork_from_here(
    client: Client, make_user: MakeUser
) -> None:
    run = finished(make_user("ann"))
    client.force_login(make_user("staff", *FORKER, staff=True))
    page = client.get(run_url(run)).content.decode()
    assert [page.count(f'name="step" value="{n}"') for n in range(4)] == [1] * 4
    assert page.count('value="turn"') == 3  # the steps whose turn calls tools
    # Step 1's point sits after step 0's answer, before step 1's calls.
    assert page.index("echo (f1)") < page.index('id="step-1"') < page.index("(f2)")


def test_a_viewer_without_the_fork_permission_is_offered_none_and_refused(
    client: Client, make_user: MakeUser
) -> None:
    run = finished(make_user("ann"))
    client.force_login(make_user("viewer", *VIEWER, staff=True))
    assert "Fork from here" not in client.get(run_url(run)).content.decode()
    assert client.post(fork_url(run), {"step": 1}).status_code == 403
    assert Run.objects.count() == 1


def test_another_users_run_is_not_found(client: Client, make_user: MakeUser) -> None:
    run = finished(make_user("ann"))
    client.force_login(make_user("bob", staff=True))
    assert client.post(fork_url(run), {"step": 1}).status_code == 404


def test_asking_differently_opens_the_fork_which_names_its_parent(
    client: Client, make_user: MakeUser
) -> None:
    run = finished(make_user("ann"))
    staff = make_user("staff", *FORKER, staff=True)
    client.force_login(staff)
    response = post(client, run, step=0, mode="again", message="Tidy it all.")
    fork = Run.objects.exclude(pk=run.pk).get()
    assert response.redirect_chain[-1][0] == run_url(fork)
    assert messages_of(response) == [
        f"Forked run {run.run_id} at step 0: this is the fork, {fork.run_id}."
    ]
    assert fork.owner == staff
    assert [m.text for m in history(fork) if m.role == "user"] == ["Tidy it all."]
    page = client.get(run_url(fork)).content.decode()
    assert f'Forked from <a href="{run_url(run)}"><code>{run.run_id}</code></a>' in page
    assert "asked “Tidy it all.”" in page
    parent_page = client.get(run_url(run)).content.decode()
    assert f'<a href="{run_url(fork)}"><code>{fork.run_id}</code></a>' in parent_page


def test_keeping_the_turn_with_a_corrected_input_asks_for_it_again(
    client: Client, make_user: MakeUser
) -> None:
    run = asking(make_user("ann"))
    client.force_login(make_user("staff", *FORKER, staff=True))
    post(
        client,
        run,
        step=1,
        mode="turn",
        tool_call_id="f2",
        input='{"to": "bob@example.com"}',
    )
    fork = Run.objects.exclude(pk=run.pk).get()
    assert (fork.forked_with_turn, fork.status) == (True, "suspended")
    assert pending(fork).input == {"to": "bob@example.com"}


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({"step": 1, "mode": "turn", "tool_call_id": "f2", "input": "{"}, "not JSON"),
        (
            {"step": 1, "mode": "turn", "tool_call_id": "f2", "input": "{}"},
            "edit.input",
        ),
        ({"step": 9}, "step:"),
        ({"step": "x"}, "step:"),
    ],
)
def test_bad_input_comes_back_to_the_run_page_and_writes_nothing(
    client: Client, make_user: MakeUser, form: dict[str, Any], says: str
) -> None:
    run = asking(make_user("ann"))
    client.force_login(make_user("staff", *FORKER, staff=True))
    response = post(client, run, **form)
    assert response.redirect_chain[-1][0] == run_url(run)
    (message,) = messages_of(response)
    assert message.startswith("Not forked:")
    assert says in message
    assert Run.objects.count() == 1
