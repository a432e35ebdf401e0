"""The admin anchor model: its permissions, and the migration that renamed it from Job."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command

from django_rqueue.models import Dashboard


@pytest.mark.django_db
def test_the_admin_pages_permissions_are_named_after_jobs():
    content_type = ContentType.objects.get_for_model(Dashboard)
    codenames = set(
        Permission.objects.filter(content_type=content_type).values_list("codename", flat=True)
    )
    assert codenames == {"view_job", "change_job", "delete_job"}


@pytest.mark.django_db(transaction=True)
def test_renaming_job_to_dashboard_keeps_every_grant():
    # migrate, not MigrationExecutor: its pre_migrate signal lets contenttypes rename the type.
    call_command("migrate", "django_rqueue", "0001", verbosity=0)
    old = ContentType.objects.get(app_label="django_rqueue", model="job")
    user = User.objects.create_user("ops")
    user.user_permissions.add(Permission.objects.get(content_type=old, codename="delete_job"))

    call_command("migrate", "django_rqueue", verbosity=0)

    renamed = ContentType.objects.get(app_label="django_rqueue", model="dashboard")
    assert renamed.pk == old.pk
    assert not ContentType.objects.filter(app_label="django_rqueue", model="job").exists()
    user = User.objects.get(pk=user.pk)  # no permission cache
    assert user.has_perm("django_rqueue.delete_job")
    assert not user.has_perm("django_rqueue.change_job")
