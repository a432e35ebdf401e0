"""The settings tables are rendered from the rows of django_rqueue.conf.settings (conf.table);
the settings reference page (tests/test_docs_reference.py) is built from them."""

from __future__ import annotations

from django_rqueue.conf.settings import OPTIONS, Setting
from django_rqueue.conf.table import markdown_table, shown_checks


def test_a_table_has_one_line_per_row_and_escapes_pipes() -> None:
    row = Setting("X", "int | None", None, "a | b", ("rqueue.E001",))
    line = markdown_table([row]).splitlines()[2]
    assert line == r"| `X` | `int \| None` | unset | a \| b | E001 |"
    assert len(markdown_table(OPTIONS).splitlines()) == 2 + len(OPTIONS)


def test_check_ids_in_a_row_of_three_or_more_make_a_range() -> None:
    ids = ("rqueue.E070", "rqueue.E071", "rqueue.E072", "rqueue.E074", "rqueue.E075")
    assert shown_checks((*ids, "rqueue.W070")) == "E070–E072, E074, E075, W070"
    assert shown_checks(()) == ""
