from django.db import migrations, models


class Migration(migrations.Migration):
    """Automatic recovery: a run counts its recovery attempts and may wait (backoff)
    before the next; a run whose leg died before closing its stream journal is marked,
    so the recovery sweep can close it for its readers."""

    dependencies = [
        ("deuz_django", "0006_step_journal"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="recovery_attempts",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="run",
            name="recover_after",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="journal_open",
            field=models.BooleanField(default=False),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("journal_open", True)),
                fields=["updated_at"],
                name="deuz_run_journal_open",
            ),
        ),
    ]
