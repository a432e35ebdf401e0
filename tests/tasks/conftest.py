"""The ``manage`` fixture of the command tests, for running real ``rqueue_work`` workers."""

from tests.management.commands.conftest import manage

__all__ = ["manage"]
