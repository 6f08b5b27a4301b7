from django.db import migrations, models


class Migration(migrations.Migration):
    """Edit, then approve: an approval keeps the input a person changed the call to
    (beside the model's), and ``edit_approval_input`` lets a decider edit it."""

    dependencies = [
        ("deuz_django", "0007_run_recovery"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="approval",
            options={
                "ordering": ["created_at", "id"],
                "permissions": [
                    (
                        "edit_approval_input",
                        "Can edit a call's input before approving it",
                    )
                ],
            },
        ),
        migrations.AddField(
            model_name="approval",
            name="edited_input",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
