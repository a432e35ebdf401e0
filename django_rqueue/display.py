"""Text read from Redis as a terminal or a log line shows it.

A job's name, arguments, error message or traceback come from whoever
enqueued it (or wrote to Redis): printed raw, an ANSI escape sequence in them
would drive the operator's terminal, and a newline in a name would forge a
second log line. :func:`printable` escapes the control characters (C0, DEL
and C1) the way Python's ``repr`` writes them.
"""

from __future__ import annotations

import re

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
