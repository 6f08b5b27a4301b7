from django.db import migrations, models


class Migration(migrations.Migration):
    """Runs keep their trace context (a W3C traceparent), so every leg of a run joins
    the trace its first leg started."""

    dependencies = [
        ("deuz_django", "0004_approval_operator_override"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="trace_context",
            field=models.CharField(blank=True, max_length=55),
        ),
    ]
