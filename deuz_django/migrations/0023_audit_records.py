"""The audit trail: append-only records hash-chained per tenant, and each tenant's chain
head (the row an append locks)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deuz_django", "0022_a2a_tasks"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditChainHead",
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
                    "tenant",
                    models.CharField(
                        blank=True, default="", max_length=100, unique=True
                    ),
                ),
                ("sequence", models.PositiveBigIntegerField(default=0)),
                (
                    "digest",
                    models.CharField(
                        default="0000000000000000000000000000000000000000000000000000000000000000",
                        max_length=64,
                    ),
                ),
            ],
            options={
                "default_permissions": (),
            },
        ),
        migrations.CreateModel(
            name="AuditRecord",
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
                    "tenant",
                    models.CharField(
                        blank=True, default="", max_length=100, verbose_name="tenant"
                    ),
                ),
                ("sequence", models.PositiveBigIntegerField(verbose_name="sequence")),
                ("created_at", models.DateTimeField(verbose_name="when")),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("decision", "decision"),
                            ("edit", "edit"),
                            ("answer", "answer"),
                            ("timeout", "timeout"),
                            ("grant", "grant"),
                            ("grant_revoked", "grant revoked"),
                            ("rule_change", "rule change"),
                            ("stop", "stop"),
                            ("fork", "fork"),
                            ("replay", "replay"),
                            ("input", "input"),
                            ("recovery", "recovery"),
                            ("vote", "vote"),
                            ("delegation", "delegation"),
                        ],
                        max_length=20,
                        verbose_name="action",
                    ),
                ),
                (
                    "actor_id",
                    models.CharField(
                        blank=True, max_length=255, verbose_name="actor id"
                    ),
                ),
                (
                    "actor_name",
                    models.CharField(blank=True, max_length=150, verbose_name="actor"),
                ),
                (
                    "operator",
                    models.CharField(
                        blank=True, max_length=150, verbose_name="operator"
                    ),
                ),
                (
                    "run_id",
                    models.CharField(
                        blank=True, db_index=True, max_length=255, verbose_name="run"
                    ),
                ),
                (
                    "approval_id",
                    models.CharField(
                        blank=True, max_length=255, verbose_name="approval"
                    ),
                ),
                (
                    "details",
                    models.JSONField(blank=True, default=dict, verbose_name="details"),
                ),
                (
                    "previous_digest",
                    models.CharField(max_length=64, verbose_name="previous digest"),
                ),
                ("digest", models.CharField(max_length=64, verbose_name="digest")),
            ],
            options={
                "verbose_name": "audit record",
                "verbose_name_plural": "audit records",
                "ordering": ["tenant", "sequence"],
                "default_permissions": ("view",),
                "indexes": [
                    models.Index(fields=["created_at"], name="deuz_audit_when")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("tenant", "sequence"), name="deuz_audit_position"
                    )
                ],
            },
        ),
    ]
