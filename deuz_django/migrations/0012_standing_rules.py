import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """Standing rules and grants: rules staff keep in the admin, grants people make
    while approving, and the automatic decisions each approval names."""

    dependencies = [
        ("deuz_django", "0011_deadlines"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Grant",
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
                ("tool_name", models.CharField(max_length=200, verbose_name="tool")),
                ("agent", models.CharField(max_length=100, verbose_name="agent")),
                ("agent_path", models.JSONField(blank=True, default=list)),
                (
                    "scope",
                    models.CharField(
                        choices=[("run", "this run"), ("owner", "the owner's runs")],
                        max_length=8,
                        verbose_name="scope",
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "expires_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="expires"),
                ),
                (
                    "revoked_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="revoked"),
                ),
                (
                    "approval",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="grants_made",
                        to="deuz_django.approval",
                    ),
                ),
                (
                    "created_by",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="deuz_grants",
                        to=settings.AUTH_USER_MODEL,
                        verbose_name="made by",
                    ),
                ),
                (
                    "owner",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="deuz_grants_for",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "revoked_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="grants",
                        to="deuz_django.run",
                    ),
                ),
            ],
            options={
                "verbose_name": "grant",
                "verbose_name_plural": "grants",
                "ordering": ["-created_at", "-id"],
            },
        ),
        migrations.AddField(
            model_name="approval",
            name="decided_by_grant",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.RESTRICT,
                related_name="decisions",
                to="deuz_django.grant",
            ),
        ),
        migrations.CreateModel(
            name="StandingRule",
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
                    "tool_name",
                    models.CharField(
                        db_index=True, max_length=200, verbose_name="tool"
                    ),
                ),
                (
                    "agent",
                    models.CharField(
                        blank=True,
                        help_text="Only calls in runs of this agent; empty: any agent's.",
                        max_length=100,
                        verbose_name="agent",
                    ),
                ),
                (
                    "condition",
                    models.JSONField(
                        blank=True,
                        default=list,
                        help_text="Clauses on the input that must all hold; none: every call.",
                        verbose_name="condition",
                    ),
                ),
                (
                    "action",
                    models.CharField(
                        choices=[("approve", "approve"), ("deny", "deny")],
                        max_length=8,
                        verbose_name="action",
                    ),
                ),
                (
                    "reason",
                    models.CharField(
                        help_text="Recorded as the reason of every decision this rule makes.",
                        max_length=500,
                        verbose_name="reason",
                    ),
                ),
                (
                    "expires_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="expires"),
                ),
                ("active", models.BooleanField(default=True, verbose_name="active")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="deuz_rules",
                        to=settings.AUTH_USER_MODEL,
                        verbose_name="made by",
                    ),
                ),
            ],
            options={
                "verbose_name": "standing rule",
                "verbose_name_plural": "standing rules",
                "ordering": ["-created_at", "-id"],
            },
        ),
        migrations.AddField(
            model_name="approval",
            name="decided_by_rule",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.RESTRICT,
                related_name="decisions",
                to="deuz_django.standingrule",
            ),
        ),
        migrations.AddConstraint(
            model_name="approval",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("decided_by_rule__isnull", True),
                    ("decided_by_grant__isnull", True),
                    _connector="OR",
                ),
                name="deuz_approval_one_automatic_decider",
            ),
        ),
        migrations.AddIndex(
            model_name="grant",
            index=models.Index(fields=["tool_name", "agent"], name="deuz_grant_tool"),
        ),
        migrations.AddConstraint(
            model_name="grant",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("run__isnull", False), ("scope", "run")),
                    models.Q(
                        ("expires_at__isnull", False),
                        ("owner__isnull", False),
                        ("scope", "owner"),
                    ),
                    _connector="OR",
                ),
                name="deuz_grant_scope_complete",
            ),
        ),
    ]
