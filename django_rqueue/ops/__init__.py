"""The read and staff side: counts, listings, alerts, staff actions, health checks, metrics.

It reads and acts on the queues through :mod:`django_rqueue.engine` and
:mod:`django_rqueue.conf`, and never imports :mod:`django_rqueue.worker` or
the master: the admin, the management commands and the Prometheus view sit
on top of it.
"""
