"""The admin anchor ``Job`` becomes ``Dashboard`` (it clashed with django_rqueue.job.Job).

The model has no table. The content type is renamed with it (Django's
contenttypes app does that for ``RenameModel``), and its permissions keep
their codenames (``view_job``, ``change_job``, ``delete_job``), so every
user's and group's grants stay as they were.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("django_rqueue", "0001_initial")]

    operations = [
        migrations.RenameModel(old_name="Job", new_name="Dashboard"),
        migrations.AlterModelOptions(
            name="dashboard",
            options={
                "default_permissions": (),
                "managed": False,
                "permissions": [
                    ("view_job", "Can view jobs"),
                    ("change_job", "Can change jobs"),
                    ("delete_job", "Can delete jobs"),
                ],
                "verbose_name": "job",
                "verbose_name_plural": "queues and jobs",
            },
        ),
    ]
