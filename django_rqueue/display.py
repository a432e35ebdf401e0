"""Job data as people see it: text read from Redis escaped for a terminal or a log line,
and arguments with their sensitive values hidden (:func:`shown_arguments`).

A job's name, arguments, error message or traceback come from whoever
enqueued it (or wrote to Redis): printed raw, an ANSI escape sequence in them
would drive the operator's terminal, and a newline in a name would forge a
second log line. :func:`printable` escapes the control characters (C0, DEL
and C1) the way Python's ``repr`` writes them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from . import registry
from .sensitive import Sensitive

if TYPE_CHECKING:
    from .job import Job

#: Control characters but newline and tab: text of several lines (a traceback).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Every control character: text that must stay on one line (a log line's fields).
_CONTROLS_AND_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escaped(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]  # "\x1b" -> "\\x1b", "\n" -> "\\n"


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` with its control characters escaped (``"\\x1b[2J"`` -> ``"\\\\x1b[2J"``);
    with ``lines=True`` newlines and tabs are kept (a traceback), else escaped too.

    Text without any control character is returned as it is (the common case costs
    one ``str.isprintable`` call when ``lines`` is false).
    """
    if not lines and text.isprintable():
        return text
    return (_CONTROLS if lines else _CONTROLS_AND_BREAKS).sub(_escaped, text)


def hidden(job: Job[Any]) -> Sensitive | None:
    """The arguments of ``job`` hidden from people: those its record names
    (:attr:`Job.sensitive <django_rqueue.job.Job.sensitive>`) and, when its job
    function is registered in this process, those the function declares; ``None``: none."""
    declared = registry.get(job.name)
    own = None if declared is None else declared.sensitive
    if job.sensitive is None or own is None:
        return own if job.sensitive is None else job.sensitive
    return job.sensitive | own


def shown_arguments(job: Job[Any]) -> tuple[list[Any], dict[str, Any]]:
    """``job``'s positional and keyword arguments as people may see them: the values of
    its sensitive arguments (``@job(sensitive=...)``) replaced by
    :data:`~django_rqueue.sensitive.MASK`."""
    sensitive = hidden(job)
    if sensitive is None:
        return job.args, job.kwargs
    return sensitive.mask(job.args, job.kwargs)
