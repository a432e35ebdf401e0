"""The prefork master behind ``manage.py rqueue_work``: it forks the worker and poller children,
watches them, and does the Redis work they cannot do for themselves.

It depends on :mod:`django_rqueue.worker` (the hooks and the child entry point),
never the reverse; :class:`~.supervisor.Supervisor` is the master itself.
"""
