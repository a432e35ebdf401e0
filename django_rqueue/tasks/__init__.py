"""``django.tasks`` on django-rqueue: the backend, the bridge to jobs and signals, the API.

This package's ``__init__`` imports nothing, so that a tool importing every
app's ``tasks`` module (as Celery's autodiscovery does) gets an empty module
and needs neither ``django.tasks`` nor the backport. Its modules import
Django's ``django.tasks`` by absolute path, through :mod:`~django_rqueue.tasks.api`.
Settings name the backend at :mod:`django_rqueue.backends`, an alias.
"""
