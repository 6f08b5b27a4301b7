import uuid

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """Notifications: the delivery log (one row per mail or webhook request, with its
    attempts), and ``retry_delivery`` for the admin's "retry now"."""

    dependencies = [
        ("deuz_django", "0008_approval_edited_input"),
    ]

    operations = [
        migrations.CreateModel(
            name="Delivery",
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
                (
                    "delivery_id",
                    models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
                ),
                (
                    "channel",
                    models.CharField(
                        choices=[("email", "email"), ("webhook", "webhook")],
                        max_length=16,
                    ),
                ),
                ("event", models.CharField(db_index=True, max_length=40)),
                ("target", models.CharField(max_length=2000)),
                ("body", models.TextField()),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("pending", "pending"),
                            ("delivered", "delivered"),
                            ("failed", "failed"),
                        ],
                        db_index=True,
                        default="pending",
                        max_length=16,
                    ),
                ),
                ("attempts", models.PositiveSmallIntegerField(default=0)),
                ("max_attempts", models.PositiveSmallIntegerField()),
                ("next_attempt_at", models.DateTimeField(blank=True, null=True)),
                (
                    "last_status_code",
                    models.PositiveSmallIntegerField(blank=True, null=True),
                ),
                ("last_error", models.TextField(blank=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("delivered_at", models.DateTimeField(blank=True, null=True)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="deliveries",
                        to="deuz_django.run",
                    ),
                ),
            ],
            options={
                "verbose_name": "notification delivery",
                "verbose_name_plural": "notification deliveries",
                "ordering": ["-created_at", "-id"],
                "permissions": [
                    ("retry_delivery", "Can retry a notification delivery now")
                ],
                "indexes": [
                    models.Index(
                        condition=models.Q(("status", "pending")),
                        fields=["next_attempt_at"],
                        name="deuz_delivery_due",
                    )
                ],
            },
        ),
    ]
