"""An admin anchor without a table: the "Rqueue" section and its permissions.

Jobs live in Redis, not in the database (:class:`django_rqueue.job.Job`).
:class:`Dashboard` exists so that the admin index lists the queues, and so that
``auth`` creates the permissions the admin pages check:
``django_rqueue.view_job`` (see the pages), ``change_job`` (retry, run now) and
``delete_job`` (delete, cancel). They keep the names they had when this model
was called ``Job`` (``0002_rename_job_dashboard``), so existing grants stand.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class Dashboard(models.Model):
    """A placeholder for the queues and jobs stored in Redis (``managed = False``: no table)."""

    id = models.CharField(primary_key=True, max_length=200)

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_job", _("Can view jobs")),
            ("change_job", _("Can change jobs")),
            ("delete_job", _("Can delete jobs")),
        ]
        verbose_name = _("job")
        verbose_name_plural = _("queues and jobs")

    def __str__(self) -> str:
        return self.id
