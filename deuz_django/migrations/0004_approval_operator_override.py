from django.db import migrations, models


class Migration(migrations.Migration):
    """Approvals record an operator override: a verdict given from the shell with
    ``deuz resume --operator NAME``, which bypasses the user permission rules."""

    dependencies = [
        ("deuz_django", "0003_dashboard_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="approval",
            name="operator",
            field=models.CharField(blank=True, max_length=150),
        ),
    ]
