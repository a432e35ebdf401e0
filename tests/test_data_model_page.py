"""The data-model page (docs/explanation/data-model.md) names every Redis key and job field
that the engine's key module declares, and no other: the page cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

from django_rqueue.engine import keys
from django_rqueue.engine.fields import JobFields, WorkflowFields

PAGE = Path(__file__).resolve().parent.parent / "docs" / "explanation" / "data-model.md"
#: A key pattern as the key module's docstring lists it: ``<prefix>:{<queue>}:job:<job id>``.
KEY = re.compile(r"^\s+(<prefix>:.+?) {2,}", re.MULTILINE)
#: A key pattern in the first cell of one of the page's tables.
ROW = re.compile(r"^\| `(<prefix>:[^`]+)` \|", re.MULTILINE)
#: The key that is never written; the page mentions it in prose only.
PROBE = "permission-probe"


def declared_keys() -> set[str]:
    return {k for k in KEY.findall(keys.__doc__ or "") if not k.endswith(PROBE)}


def page_keys(text: str) -> set[str]:
    return set(ROW.findall(text))


def test_the_page_lists_every_key_the_engine_declares_and_no_other() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert page_keys(text) == declared_keys()
    assert f"`{PROBE}`" in text
    # Positive control: both sides hold the job record and a key shared by every queue.
    assert {"<prefix>:{<queue>}:job:<job id>", "<prefix>:workers"} <= declared_keys()


def test_the_page_names_every_stored_job_field() -> None:
    text = PAGE.read_text(encoding="utf-8")
    fields = {
        value
        for name, value in vars(JobFields).items()
        if name.isupper() and isinstance(value, str) and value != JobFields.EXPIRES_IN
    }
    fields |= {JobFields.payload_part(2), "err:<n>", "err_at:<n>", "i:<k>"}
    missing = sorted(f for f in fields if f"`{f}`" not in text)
    assert missing == []
    assert JobFields.error_part(1).replace("1", "<n>") == "err:<n>"
    assert JobFields.error_time_part(1).replace("1", "<n>") == "err_at:<n>"
    assert JobFields.input_part(1).replace("1", "<k>") == "i:<k>"


def test_the_page_names_every_workflow_record_field() -> None:
    text = PAGE.read_text(encoding="utf-8")
    section = text.partition("### Workflow records")[2].partition("\n## ")[0]
    fields = {
        value
        for name, value in vars(WorkflowFields).items()
        if name.isupper() and isinstance(value, str)
    }
    assert section and fields
    assert sorted(f for f in fields if f"`{f}`" not in section) == []


def test_a_key_missing_from_the_page_is_found() -> None:
    text = PAGE.read_text(encoding="utf-8")
    row = "| `<prefix>:{<queue>}:paused` |"
    assert row in text
    assert page_keys(text.replace(row, "| `paused` |")) != declared_keys()
