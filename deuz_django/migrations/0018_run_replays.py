"""Replays: a run may replay another (``replay_of``, kept as null when the original is
deleted) with what was asked to change (``replay_options``), and ``replay_run`` lets
staff replay other users' runs."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deuz_django", "0017_run_forks"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="run",
            options={
                "ordering": ["-updated_at"],
                "permissions": [
                    ("decide_approval", "Can decide approvals on other users' runs"),
                    ("resume_run", "Can resume other users' runs"),
                    ("stop_run", "Can stop other users' runs"),
                    ("fork_run", "Can fork other users' runs"),
                    ("replay_run", "Can replay other users' runs"),
                ],
            },
        ),
        migrations.AddField(
            model_name="run",
            name="replay_of",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="replays",
                to="deuz_django.run",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="replay_options",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
