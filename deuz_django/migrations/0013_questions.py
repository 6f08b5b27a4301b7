from django.db import migrations, models


class Migration(migrations.Migration):
    """Questions for a person: the ``question`` kind of approval, what it asks and the
    answer it got; and the ``client_tool`` kind, a client tool's call waiting for the
    result its client sends. Each has one row per call of a run, as an approval does."""

    dependencies = [
        ("deuz_django", "0012_standing_rules"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="approval",
            name="deuz_approval_per_run",
        ),
        migrations.AddField(
            model_name="approval",
            name="answer",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="approval",
            name="question",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="approval",
            name="kind",
            field=models.CharField(
                choices=[
                    ("approval", "approval"),
                    ("outcome_unknown", "outcome unknown"),
                    ("question", "question"),
                    ("client_tool", "client tool result"),
                ],
                default="approval",
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="approval",
            constraint=models.UniqueConstraint(
                condition=models.Q(
                    ("kind__in", ["approval", "question", "client_tool"])
                ),
                fields=("run", "approval_id"),
                name="deuz_approval_per_run",
            ),
        ),
    ]
