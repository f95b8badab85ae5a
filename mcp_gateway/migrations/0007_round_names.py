"""A round's names say one thing each: `request_state_hash` (was token_hash), the final state
"finished" (was "done", as a call's), and a first call's early answers in `first_call_answers`
instead of sharing `answers` with the answers that answered the round."""

from django.db import migrations, models


def forwards(apps, schema_editor):
    Round = apps.get_model("mcp_gateway", "Round")
    Round.objects.filter(state="done").update(state="finished")
    # Before a round is answered, `answers` held a first call's early answers.
    early = Round.objects.filter(state__in=["running", "asking"], answers__isnull=False)
    for round_ in early.only("pk", "answers"):
        Round.objects.filter(pk=round_.pk).update(first_call_answers=round_.answers, answers=None)


def backwards(apps, schema_editor):
    Round = apps.get_model("mcp_gateway", "Round")
    Round.objects.filter(state="finished").update(state="done")
    for round_ in Round.objects.filter(first_call_answers__isnull=False).only("pk", "first_call_answers"):
        Round.objects.filter(pk=round_.pk).update(answers=round_.first_call_answers)


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_gateway", "0006_round_outcome_exact_json"),
    ]

    operations = [
        migrations.RenameField(model_name="round", old_name="token_hash", new_name="request_state_hash"),
        migrations.AddField(
            model_name="round",
            name="first_call_answers",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="round",
            name="state",
            field=models.CharField(
                choices=[
                    ("running", "Running"),
                    ("asking", "Asking"),
                    ("answered", "Answered"),
                    ("finished", "Finished"),
                ],
                default="running",
                max_length=16,
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
