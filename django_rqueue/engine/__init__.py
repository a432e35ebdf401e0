"""The Redis engine: connections, key names, one Lua script per transition, pipelining.

Nothing here knows about Django's request cycle or the worker processes; the
Django-facing modules and :mod:`django_rqueue.worker` build on it.
"""
