"""The Sentry integration's options, and finding them for the client of the running code.

Kept apart from :class:`~django_rqueue.contrib.sentry.RqueueIntegration` so that the
middleware reads them without importing the integration (which installs it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import sentry_sdk

#: The integration's identifier (``Integration.identifier``): what
#: ``sentry_sdk.get_client().get_integration()`` finds it by.
IDENTIFIER = "rqueue"
#: The ``origin`` of the spans and transactions it starts (Sentry's ``auto.<kind>.<name>``
#: convention: ``auto.queue.celery``, ``auto.queue.rq``).
ORIGIN = f"auto.queue.{IDENTIFIER}"


@dataclass(frozen=True)
class Options:
    """What ``RqueueIntegration(...)`` was given, checked (see its docstring)."""

    report_retries: bool = False
    monitor_periodic: bool = False
    exclude_periodic: tuple[re.Pattern[str], ...] = ()
    monitor_config: bool = True

    @classmethod
    def of(
        cls,
        *,
        report_retries: bool,
        monitor_periodic: bool,
        exclude_periodic: Iterable[str],
        monitor_config: bool,
    ) -> Options:
        """Check and build the options.

        Raises:
            TypeError: a flag is not a ``bool``, or ``exclude_periodic`` is a ``str`` or
                not a sequence of ``str``.
            ValueError: a pattern of ``exclude_periodic`` is not a regular expression.
        """
        flags = {
            "report_retries": report_retries,
            "monitor_periodic": monitor_periodic,
            "monitor_config": monitor_config,
        }
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise TypeError(f"RqueueIntegration({name}=...) must be a bool, not {value!r}")
        given = _texts(exclude_periodic)
        if given is None:
            raise TypeError(
                "RqueueIntegration(exclude_periodic=...) must be a list of regular "
                f"expressions (str), not {exclude_periodic!r}"
            )
        patterns: list[re.Pattern[str]] = []
        for pattern in given:
            try:
                patterns.append(re.compile(pattern))
            except re.error as exc:
                raise ValueError(
                    f"RqueueIntegration(exclude_periodic=...): {pattern!r} is not a regular "
                    f"expression: {exc}"
                ) from None
        return cls(report_retries, monitor_periodic, tuple(patterns), monitor_config)

    def monitors(self, entry: str) -> bool:
        """Whether the runs of periodic entry ``entry`` report check-ins."""
        return self.monitor_periodic and not any(p.fullmatch(entry) for p in self.exclude_periodic)


def _texts(value: object) -> tuple[str, ...] | None:
    """``value`` as a tuple of ``str`` (any iterable of them but a ``str``); ``None`` if
    it is not one."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        return None
    items = tuple(value)
    return items if all(isinstance(item, str) for item in items) else None


def current() -> Options | None:
    """The options of the integration of the current Sentry client; ``None`` when there is
    no active client, or it was initialised without the integration (the hooks then do
    nothing)."""
    integration = sentry_sdk.get_client().get_integration(IDENTIFIER)
    options = getattr(integration, "options", None)
    return options if isinstance(options, Options) else None
