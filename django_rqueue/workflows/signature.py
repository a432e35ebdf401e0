"""Signatures: one call of a job function (its arguments and options) as a node of a workflow.

``job.s(*args, **kwargs)`` and ``job.si(...)`` (:mod:`django_rqueue.decorators`) make one;
:meth:`Signature.using` sets a node's options, with the names and the checks of
``JobFunction.using()``; ``a | b`` (from :class:`~django_rqueue.workflows.canvas.Element`)
chains it with another element. Nothing here talks to Redis: a signature is checked and
encoded when its workflow is compiled (:mod:`~django_rqueue.workflows.graph`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Unpack

from ..options import JobOptions, UsingOptions, using_options
from .canvas import Element, ElementKind
from .graph import check_arguments

if TYPE_CHECKING:
    from ..types import JobSpec


@dataclasses.dataclass(frozen=True, eq=False)
class Signature(Element):
    """One call of a job function in a workflow: a node."""

    kind: ClassVar[ElementKind] = "signature"

    #: The job function (a ``@job``, possibly bound by ``using()``).
    job_function: JobSpec
    #: Its own positional arguments (after the prepended result, if any).
    args: tuple[Any, ...]
    #: Its keyword arguments.
    kwargs: Mapping[str, Any]
    #: Made with ``.si()``: nothing is prepended to its arguments.
    immutable: bool
    #: The node's options: the job function's, then this signature's ``using()``.
    options: JobOptions
    #: Its arguments fit the function as they are, without a prepended value (checked by
    #: :meth:`of`; the compile then does not check them again).
    fits_as_is: bool = False

    @classmethod
    def of(
        cls,
        job_function: JobSpec,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        *,
        immutable: bool,
    ) -> Signature:
        """A signature of ``job_function`` called with ``args`` and ``kwargs``.

        The arguments are checked as ``.delay()`` checks them; a mutable signature
        may still get a result first (after another element), so it passes when they
        fit either with or without one prepended value (the compile checks them
        exactly).

        Raises:
            TypeError: they do not fit (the message is ``.delay()``'s).
        """
        args, kwargs = tuple(args), dict(kwargs)
        fits = check_arguments(job_function, args, kwargs, prepended=False, maybe=not immutable)
        return cls(job_function, args, kwargs, immutable, job_function.options, fits)

    @property
    def name(self) -> str:
        """The job's name."""
        return self.job_function.name

    def using(self, **options: Unpack[UsingOptions]) -> Signature:
        """A copy with these options for this node: the names, conversions and checks of
        :meth:`django_rqueue.job_functions.BaseJobFunction.using` (``queue``, ``priority``,
        ``delay`` counted from the node's release when it waits, ``on_dependency_failure``,
        ``depends_on`` for inputs outside the workflow, ...).

        Raises:
            TypeError: an unknown option, or ``depends_on`` is not a list.
            ValueError: a bad value; the options a node cannot take (``unique_key``,
                ``job_id``, ``on_commit``, its own ``dependency_timeout``) are refused when
                the workflow is compiled.
        """
        return dataclasses.replace(self, options=self.options.merged(using_options(**options)))

    def __repr__(self) -> str:
        shown = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}.{'si' if self.immutable else 's'}({', '.join(shown)})"
