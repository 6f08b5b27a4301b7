"""Stopping a run (by a person, a run-wide limit or a loop), and legs counted."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deuz_django", "0014_decisions_bound_to_asks"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
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
                ],
            },
        ),
        migrations.AddField(
            model_name="run",
            name="legs",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="run",
            name="stop_operator",
            field=models.CharField(blank=True, max_length=150),
        ),
        migrations.AddField(
            model_name="run",
            name="stop_reason",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="run",
            name="stop_requested_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="stopped_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="stopped_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="deuz_stopped_runs",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="approval",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "pending"),
                    ("approved", "approved"),
                    ("denied", "denied"),
                    ("expired", "expired"),
                    ("cancelled", "cancelled"),
                ],
                db_index=True,
                default="pending",
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="status",
            field=models.CharField(
                choices=[
                    ("running", "running"),
                    ("suspended", "suspended"),
                    ("completed", "completed"),
                    ("stopped", "stopped"),
                ],
                db_index=True,
                default="running",
                max_length=16,
            ),
        ),
    ]
