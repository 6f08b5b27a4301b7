"""Replays in the admin: the "Replay this run …" form on a finished run's page, the links
between a run and its replays, and the page that shows them side by side."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils.html import strip_tags

from deuz_django.models import Run, RunStatus
from deuz_django.runs.continuing import join_handed_off
from tests.django.admin_support import VIEWER, messages_of, run_url
from tests.django.replay_support import finished, replayed
from tests.django.run_support import suspended

pytestmark = pytest.mark.django_db(transaction=True)

MakeUser = Callable[..., User]
REPLAYER = (*VIEWER, "deuz_django.replay_run")


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def page_text(response: Any) -> str:
    """The page's words, without its markup or line breaks."""
    return " ".join(strip_tags(response.content.decode()).split())


def replay_url(run: Run) -> str:
    return reverse("admin:deuz_django_run_replay", args=[run.pk])


def comparison_url(run: Run) -> str:
    return reverse("admin:deuz_django_run_comparison", args=[run.pk])


def test_staff_replay_a_run_from_its_page_and_nothing_executes(
    ann: User, make_user: MakeUser, effects: Callable[[], list[str]]
) -> None:
    original = finished(ann)
    boss = make_user("boss", *REPLAYER, staff=True)
    page = signed_in(boss).get(run_url(original))
    assert "Replay this run …" in page.content.decode()
    response = signed_in(boss).post(
        replay_url(original),
        {"agent": "mailing_v2", "system": "Be brief."},
        follow=True,
    )
    join_handed_off(timeout=60)
    replay = Run.objects.get(replay_of=original)
    assert response.redirect_chain[-1][0] == run_url(replay)
    assert messages_of(response) == [
        f"Replay {replay.run_id} started: it executes no tool; compare it with "
        f"{original.run_id} once it ends."
    ]
    replay.refresh_from_db()
    assert (replay.owner, replay.status) == (boss, RunStatus.COMPLETED)
    assert replay.replay_options == {"agent": "mailing_v2", "system": "Be brief."}
    assert sorted(effects()) == ["echo:hi", "send_email:ann@example.com"]


def test_a_run_and_its_replays_link_to_their_comparison(
    ann: User, make_user: MakeUser
) -> None:
    original = finished(ann)
    replay = replayed(original, ann, agent="mailing_v2")
    boss = signed_in(make_user("boss", *VIEWER, staff=True))
    original_page = boss.get(run_url(original)).content.decode()
    assert "Replays of this run" in original_page
    assert comparison_url(replay) in original_page
    replay_page = page_text(boss.get(run_url(replay)))
    assert f"A replay of {original.run_id}" in replay_page
    assert "Compare with the original" in replay_page


def test_the_comparison_page_shows_both_transcripts_and_where_they_differ(
    ann: User, make_user: MakeUser
) -> None:
    replay = replayed(finished(ann), ann, agent="mailing_v2", system="Be brief.")
    response = signed_in(make_user("boss", *VIEWER, staff=True)).get(
        comparison_url(replay)
    )
    assert response.status_code == 200
    text = page_text(response)
    assert "They first differ at step 1." in text
    assert "Mailed Ann." in text
    assert "Mailed Ann, briefly." in text
    assert "text changed" in text
    assert "Be brief." in text


def test_a_diverged_replay_shows_the_call_it_stopped_on_unexecuted(
    ann: User, make_user: MakeUser
) -> None:
    replay = replayed(finished(ann), ann, agent="diverging")
    page = signed_in(make_user("boss", *VIEWER, staff=True)).get(comparison_url(replay))
    text = page_text(page)
    assert "Stopped by the system: The replayed model asked for send_email(" in text
    assert "Not executed: no result." in text
    assert "only here" in text


def test_the_replay_form_needs_replay_run_on_other_users_runs(
    ann: User, make_user: MakeUser
) -> None:
    original = finished(ann)
    viewer = signed_in(make_user("viewer", *VIEWER, staff=True))
    assert "Replay this run" not in viewer.get(run_url(original)).content.decode()
    assert viewer.post(replay_url(original), {"agent": "mailing"}).status_code == 403
    assert Run.objects.count() == 1


def test_bad_replays_say_why_and_write_nothing(ann: User, make_user: MakeUser) -> None:
    original = finished(ann)
    waiting = suspended("mailing", owner=ann)
    boss = signed_in(make_user("boss", *REPLAYER, staff=True))
    assert "Replay this run" not in boss.get(run_url(waiting)).content.decode()
    unknown = boss.post(replay_url(original), {"agent": "nope"}, follow=True)
    assert messages_of(unknown)[0].startswith("Unknown agent 'nope'")
    not_done = boss.post(replay_url(waiting), {}, follow=True)
    assert "only a completed or stopped run can be replayed" in messages_of(not_done)[0]
    assert boss.get(replay_url(original)).status_code == 405
    assert Run.objects.count() == 2


def test_a_run_that_replays_nothing_has_no_comparison_page(
    ann: User, make_user: MakeUser
) -> None:
    boss = signed_in(make_user("boss", *VIEWER, staff=True))
    assert boss.get(comparison_url(finished(ann))).status_code == 404
