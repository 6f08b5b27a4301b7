"""StreamEntry is now StreamJournalEntry: one name, the stream journal, for the setting,
the backends and their rows. Its table is renamed; its rows stay."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deuz_django", "0015_run_limits_and_stop"),
    ]

    operations = [
        migrations.RenameModel(old_name="StreamEntry", new_name="StreamJournalEntry"),
        migrations.AlterField(
            model_name="streamjournalentry",
            name="run",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="journal_entries",
                to="deuz_django.run",
            ),
        ),
    ]
