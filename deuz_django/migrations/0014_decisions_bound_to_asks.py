"""Approvals bound to the ask that asked them, executions to the decision behind them.

Rows recorded before this migration have no ask (``step_index`` NULL): they never
settle a later call. A run suspended across the upgrade keeps working: its pending rows
and the rows of its current suspension are given the run's boundary as their ask.
"""

import json

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def bind_current_asks(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """On a suspended run, the latest row of each call it waits on joins the current
    ask (rows without a digest are checked against their stored input)."""
    Approval = apps.get_model("deuz_django", "Approval")
    Run = apps.get_model("deuz_django", "Run")
    for run in Run.objects.filter(status="suspended").iterator():
        waiting = {
            item["approvalId"] for item in json.loads(run.pending_approvals or "[]")
        }
        latest = {}
        for row in Approval.objects.filter(run=run).order_by("pk"):
            if row.approval_id in waiting or row.kind == "client_tool":
                latest[row.approval_id] = row.pk
        Approval.objects.filter(pk__in=latest.values()).update(
            step_index=run.step_index
        )


class Migration(migrations.Migration):
    dependencies = [
        ("deuz_django", "0013_questions"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="approval",
            name="deuz_pending_outcome_per_call",
        ),
        migrations.RemoveConstraint(
            model_name="approval",
            name="deuz_approval_per_run",
        ),
        migrations.AddField(
            model_name="approval",
            name="decided_on_definition",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="approval",
            name="input_digest",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="approval",
            name="step_index",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="approval",
            name="tool_definition",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="tools_fingerprint",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="runcall",
            name="decision",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.RESTRICT,
                related_name="execution",
                to="deuz_django.approval",
            ),
        ),
        migrations.AddField(
            model_name="runcall",
            name="started_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="runcall",
            name="tool_name",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.RunPython(bind_current_asks, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="approval",
            constraint=models.UniqueConstraint(
                fields=("run", "step_index", "approval_id"),
                name="deuz_approval_per_ask",
            ),
        ),
    ]
