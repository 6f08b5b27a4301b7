"""A2A: the context a run belongs to, and where its status changes are pushed."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deuz_django", "0021_approval_votes"),
    ]

    operations = [
        migrations.CreateModel(
            name="TaskContext",
            fields=[
                (
                    "run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="task_context",
                        serialize=False,
                        to="deuz_django.run",
                    ),
                ),
                ("context_id", models.CharField(db_index=True, max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "ordering": ["created_at"],
            },
        ),
        migrations.CreateModel(
            name="PushConfig",
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
                ("config_id", models.CharField(max_length=100)),
                ("url", models.URLField(max_length=2000)),
                ("token", models.CharField(blank=True, max_length=500)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="push_configs",
                        to="deuz_django.run",
                    ),
                ),
            ],
            options={
                "ordering": ["created_at", "id"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("run", "config_id"), name="deuz_push_config_unique_id"
                    )
                ],
            },
        ),
    ]
