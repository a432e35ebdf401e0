"""django_rqueue.display: text from Redis as a terminal or a log line shows it."""

from __future__ import annotations

import pytest

from django_rqueue.display import printable


@pytest.mark.parametrize(
    ("text", "one_line", "several_lines"),
    [
        ("app.jobs.send", "app.jobs.send", "app.jobs.send"),
        ("héllo wörld ✓", "héllo wörld ✓", "héllo wörld ✓"),
        ("a\nb\tc", "a\\nb\\tc", "a\nb\tc"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        (
            "bell\x07 del\x7f csi\x9b cr\r",
            "bell\\x07 del\\x7f csi\\x9b cr\\r",
            "bell\\x07 del\\x7f csi\\x9b cr\\r",
        ),
    ],
)
def test_control_characters_are_escaped_as_repr_writes_them(
    text: str, one_line: str, several_lines: str
):
    assert printable(text) == one_line
    assert printable(text, lines=True) == several_lines
