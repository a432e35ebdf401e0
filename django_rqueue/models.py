"""An admin anchor without a table: the "Rqueue" section and its permissions.

Jobs live in Redis, not in the database. :class:`Job` exists so that the
admin index lists the queues, and so that ``auth`` creates the permissions
the admin pages check: ``django_rqueue.view_job`` (see the pages),
``change_job`` (retry, run now) and ``delete_job`` (delete, cancel).
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class Job(models.Model):
    """A placeholder for jobs stored in Redis (``managed = False``: no table)."""

    id = models.CharField(primary_key=True, max_length=200)

    class Meta:
        managed = False
        default_permissions = ("view", "change", "delete")
        verbose_name = _("job")
        verbose_name_plural = _("queues and jobs")

    def __str__(self) -> str:
        return self.id
