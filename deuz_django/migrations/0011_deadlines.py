from django.db import migrations, models


class Migration(migrations.Migration):
    """Deadlines on approvals (deuz_django.deadlines): when a reminder is due and was
    sent, when the call times out or escalates, whom it escalates to and by how much that
    moves the deadline, when it escalated; and the sweep's indexes over the due ones."""

    dependencies = [
        ("deuz_django", "0010_notifications"),
    ]

    operations = [
        migrations.AddField(
            model_name="approval",
            name="remind_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="approval",
            name="reminded_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="approval",
            name="deadline_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="approval",
            name="escalate_to",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="approval",
            name="extend_by",
            field=models.DurationField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="approval",
            name="escalated_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="approval",
            index=models.Index(
                condition=models.Q(
                    ("deadline_at__isnull", False), ("status", "pending")
                ),
                fields=["deadline_at"],
                name="deuz_approval_deadline",
            ),
        ),
        migrations.AddIndex(
            model_name="approval",
            index=models.Index(
                condition=models.Q(
                    ("remind_at__isnull", False),
                    ("reminded_at__isnull", True),
                    ("status", "pending"),
                ),
                fields=["remind_at"],
                name="deuz_approval_reminder",
            ),
        ),
    ]
