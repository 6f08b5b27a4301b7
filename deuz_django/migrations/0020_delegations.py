"""Delegation: a person lends their approval rights to another for a period; a
delegate's decision records whose rights it used and the delegation that lent them."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deuz_django", "0019_run_inputs"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="approval",
            name="decided_on_behalf_of",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.CreateModel(
            name="Delegation",
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
                ("starts_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("ends_at", models.DateTimeField()),
                ("note", models.CharField(blank=True, max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                (
                    "delegate",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="deuz_delegations_received",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "delegator",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="deuz_delegations_given",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "delegation",
                "ordering": ("-created_at", "-pk"),
            },
        ),
        migrations.AddField(
            model_name="approval",
            name="delegation",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="decisions",
                to="deuz_django.delegation",
            ),
        ),
        migrations.AddIndex(
            model_name="delegation",
            index=models.Index(
                fields=["delegate", "ends_at"], name="deuz_delegation_in_force"
            ),
        ),
        migrations.AddConstraint(
            model_name="delegation",
            constraint=models.CheckConstraint(
                condition=models.Q(("delegator", models.F("delegate")), _negated=True),
                name="deuz_delegation_not_to_oneself",
            ),
        ),
        migrations.AddConstraint(
            model_name="delegation",
            constraint=models.CheckConstraint(
                condition=models.Q(("ends_at__gt", models.F("starts_at"))),
                name="deuz_delegation_ends_after_it_starts",
            ),
        ),
    ]
