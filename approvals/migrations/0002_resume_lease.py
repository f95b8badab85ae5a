from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='approvalrequest',
            name='resume_leased_until',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
