"""Steering: what people say to a run while it runs or waits — one row an input, in the
order the run accepted them (``Run.input_seq`` counts them), marked delivered by the
checkpoint that first held it."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deuz_django", "0018_run_replays"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="input_seq",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.CreateModel(
            name="RunInput",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("seq", models.PositiveIntegerField()),
                ("input_id", models.CharField(max_length=100)),
                ("text", models.TextField()),
                (
                    "accepted_at",
                    models.DateTimeField(default=django.utils.timezone.now),
                ),
                ("operator", models.CharField(blank=True, max_length=150)),
                (
                    "delivered_at_step",
                    models.PositiveIntegerField(blank=True, null=True),
                ),
                ("delivered_at", models.DateTimeField(blank=True, null=True)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="inputs",
                        to="deuz_django.run",
                    ),
                ),
                (
                    "sent_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="deuz_run_inputs",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "run input",
                "ordering": ["run", "seq"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("run", "seq"), name="deuz_input_position"
                    ),
                    models.UniqueConstraint(
                        fields=("run", "input_id"), name="deuz_input_id"
                    ),
                ],
            },
        ),
    ]
