"""The "Rqueue" section of the Django admin: overview, job lists, details, actions.

Registered on the default admin site; to mount it on another site, register
:class:`~django_rqueue.admin.options.JobAdmin` for :class:`django_rqueue.models.Dashboard`
there.
"""

from __future__ import annotations

from django.contrib import admin

from ..models import Dashboard
from .options import JobAdmin

admin.site.register(Dashboard, JobAdmin)

__all__ = ["JobAdmin"]
