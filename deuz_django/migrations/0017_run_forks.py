"""Forks: a run's lineage (the run and step it was forked from, the turn kept, the edit
made there), and the permission to fork other users' runs."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deuz_django", "0016_stream_journal_entry"),
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
                ],
            },
        ),
        migrations.AddField(
            model_name="run",
            name="forked_from",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="forks",
                to="deuz_django.run",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="forked_at_step",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="forked_with_turn",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="run",
            name="fork_edit",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
