import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """The step journal (``RunStep``, ``RunCall``), and approvals of kind
    ``outcome_unknown`` for calls a crash left in doubt."""

    dependencies = [
        ("deuz_django", "0005_run_trace_context"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="RunCall",
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
                ("tool_call_id", models.CharField(max_length=200)),
                ("finished", models.BooleanField(default=False)),
                ("result", models.TextField(blank=True)),
                ("is_error", models.BooleanField(default=False)),
            ],
            options={
                "ordering": ["step", "id"],
            },
        ),
        migrations.CreateModel(
            name="RunStep",
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
                ("step_index", models.PositiveIntegerField()),
                ("basis", models.PositiveIntegerField()),
                ("message", models.TextField()),
            ],
            options={
                "ordering": ["run", "step_index"],
            },
        ),
        migrations.RemoveConstraint(
            model_name="approval",
            name="deuz_approval_per_run",
        ),
        migrations.AddField(
            model_name="approval",
            name="kind",
            field=models.CharField(
                choices=[
                    ("approval", "approval"),
                    ("outcome_unknown", "outcome unknown"),
                ],
                default="approval",
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="approval",
            constraint=models.UniqueConstraint(
                condition=models.Q(("kind", "approval")),
                fields=("run", "approval_id"),
                name="deuz_approval_per_run",
            ),
        ),
        migrations.AddConstraint(
            model_name="approval",
            constraint=models.UniqueConstraint(
                condition=models.Q(("kind", "outcome_unknown"), ("status", "pending")),
                fields=("run", "approval_id"),
                name="deuz_pending_outcome_per_call",
            ),
        ),
        migrations.AddField(
            model_name="runstep",
            name="run",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="journal_steps",
                to="deuz_django.run",
            ),
        ),
        migrations.AddField(
            model_name="runcall",
            name="step",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="calls",
                to="deuz_django.runstep",
            ),
        ),
        migrations.AddConstraint(
            model_name="runstep",
            constraint=models.UniqueConstraint(
                fields=("run", "step_index"), name="deuz_journal_step"
            ),
        ),
        migrations.AddConstraint(
            model_name="runcall",
            constraint=models.UniqueConstraint(
                fields=("step", "tool_call_id"), name="deuz_journal_call"
            ),
        ),
    ]
