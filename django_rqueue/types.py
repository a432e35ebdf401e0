"""What the layers below ``@job`` need of a job function: the :class:`JobSpec` protocol.

Enqueueing, running an attempt, the registry and the worker speak this protocol;
:class:`~django_rqueue.job_functions.JobFunction` (and the ``django.tasks`` bridge's
``TaskJobFunction``) implement it. So nothing below :mod:`django_rqueue.decorators`
imports it, and the decorator sits on top of the stack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .conf import Config
    from .job import Job
    from .options import JobOptions
    from .sensitive import Sensitive


class JobSpec(Protocol):
    """A job function as enqueueing and running see it."""

    @property
    def name(self) -> str:
        """The name workers look the job up by (``"<module>.<qualname>"`` unless given)."""
        ...

    @property
    def func(self) -> Callable[..., Any]:
        """The decorated function."""
        ...

    @property
    def options(self) -> JobOptions:
        """The options set by ``@job`` and ``using()``."""
        ...

    @property
    def takes_context(self) -> bool:
        """Whether :attr:`func` is given a ``JobContext`` first when it runs as a job."""
        ...

    @property
    def is_async(self) -> bool:
        """Whether :attr:`func` is an ``async def`` function."""
        ...

    @property
    def sensitive(self) -> Sensitive | None:
        """The arguments hidden from people; ``None``: none."""
        ...

    #: Enqueue's cache, ``(config, options, django_rqueue.enqueue.Plan)``: the plan is
    #: ``Any`` here because this module sits below :mod:`django_rqueue.enqueue`.
    _plan_cache: tuple[Config, JobOptions, Any] | None

    def arguments(self, job: Job[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments to call :attr:`func` with for ``job``'s attempt."""
        ...

    def check_arguments(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Raise ``TypeError`` when :attr:`func` does not accept ``args`` and ``kwargs``."""
        ...
