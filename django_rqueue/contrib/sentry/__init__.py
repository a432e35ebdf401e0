"""Job failures, traces and periodic check-ins in Sentry: :class:`RqueueIntegration`.

Install the extra ``django-rqueue[sentry]`` (sentry-sdk) and list the integration where
Sentry is initialised (your settings, so that ``rqueue_work`` and its children have it)::

    import sentry_sdk
    from django_rqueue.contrib.sentry import RqueueIntegration

    sentry_sdk.init(dsn=..., integrations=[RqueueIntegration()])

Nothing goes in ``RQUEUE``: the integration installs its job middleware
(:mod:`.middleware`, through :func:`django_rqueue.middleware.install`) and flushes the
client at ``worker_process_shutdown``. How to use it: the "Sentry" how-to.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sentry_sdk
from sentry_sdk.integrations import Integration
from sentry_sdk.scope import add_global_event_processor

from ... import signals
from ...middleware import install
from .middleware import SentryMiddleware, drop_logged_duplicate
from .options import IDENTIFIER, ORIGIN, Options

__all__ = ["RqueueIntegration"]

#: The ``dispatch_uid`` of the flush connected to ``worker_process_shutdown``.
FLUSH_UID = "django_rqueue.contrib.sentry.flush"


class RqueueIntegration(Integration):
    """The sentry-sdk integration of django-rqueue.

    - Each attempt runs in a new isolation scope tagged ``rqueue.job`` (the job's name),
      ``rqueue.queue``, ``rqueue.attempt`` (from ``"1"``) and ``rqueue.job_id``, inside a
      ``queue.process`` transaction named after the job that continues the trace of the
      code that enqueued it (the headers ``sentry-trace`` and ``baggage``).
    - A job's failure is reported once: when its last attempt fails (tag
      ``rqueue.outcome = "failed"``, level ``error``). A failed attempt that will be
      retried is reported only with ``report_retries=True`` (``"retrying"``, level
      ``warning``); :class:`~django_rqueue.exceptions.Retry`,
      :class:`~django_rqueue.exceptions.Reject` and
      :class:`~django_rqueue.exceptions.JobCancelled` never are.
    - With ``monitor_periodic=True``, each run of a ``RQUEUE["SCHEDULE"]`` entry is a
      check-in of a Sentry cron monitor whose slug is made from the entry's name
      (:func:`.crons.monitor_slug`): ``in_progress`` when the tick is enqueued, ``ok`` or
      ``error`` when its run ends, except the entries whose name matches (fully) one of
      the regular expressions of ``exclude_periodic``. With ``monitor_config=True`` (the
      default) the first check-in carries the entry's schedule, so Sentry creates and
      updates the monitor (:func:`.crons.monitor_config`).

    Raises:
        TypeError: a flag is not a ``bool``, or ``exclude_periodic`` not a list of ``str``.
        ValueError: a pattern of ``exclude_periodic`` is not a regular expression.
    """

    identifier = IDENTIFIER
    origin = ORIGIN

    def __init__(
        self,
        *,
        report_retries: bool = False,
        monitor_periodic: bool = False,
        exclude_periodic: Iterable[str] = (),
        monitor_config: bool = True,
    ) -> None:
        self.options = Options.of(
            report_retries=report_retries,
            monitor_periodic=monitor_periodic,
            exclude_periodic=exclude_periodic,
            monitor_config=monitor_config,
        )

    @staticmethod
    def setup_once() -> None:
        """Install the job middleware, the flush at ``worker_process_shutdown`` and the
        event processor that keeps the worker's log line of a reported failure from being
        a second event (once per process, as sentry-sdk calls it)."""
        install(SentryMiddleware())
        add_global_event_processor(drop_logged_duplicate)
        signals.worker_process_shutdown.connect(_flush, weak=False, dispatch_uid=FLUSH_UID)


def _flush(sender: object, **kwargs: Any) -> None:
    """Send what the client holds before the process exits (worker children end with
    ``os._exit``, which skips sentry-sdk's own ``atexit`` flush), within its
    ``shutdown_timeout`` (2 s by default)."""
    sentry_sdk.get_client().flush()
