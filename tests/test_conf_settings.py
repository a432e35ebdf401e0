"""The settings rows (django_rqueue.conf.settings): each key once, agreeing with the checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import django_rqueue.conf
from django_rqueue.conf import defaults, problems
from django_rqueue.conf.settings import (
    GENERAL_CHECKS,
    OPTIONS,
    QUEUE_OPTIONS,
    SETTINGS,
    TOP_LEVEL_KEYS,
    Setting,
)
from django_rqueue.conf.validation import WITH_OTHERS
from django_rqueue.engine.fields import RECORD_DEFAULTS, JobFields

URL = "redis://127.0.0.1:6379/0"
ALL_ROWS = [*SETTINGS, *OPTIONS, *QUEUE_OPTIONS]


@pytest.mark.parametrize("row", ALL_ROWS, ids=lambda row: row.key)
def test_every_default_passes_its_own_check(row: Setting) -> None:
    if row.check is not None and row.default is not None:  # None: unset, nothing to check
        assert row.check(f"RQUEUE[{row.key!r}]", row.default) == []


@pytest.mark.parametrize(
    "row", [r for r in SETTINGS if r.key != "WEBHOOKS"], ids=lambda row: row.key
)
def test_a_junk_value_raises_one_of_the_ids_its_row_lists(row: Setting) -> None:
    raw = {"REDIS_URL": URL, row.key: object()}
    found = {m.id for m in problems(raw)}
    assert found and found <= set(row.checks), found


@pytest.mark.parametrize("row", [*OPTIONS, *QUEUE_OPTIONS], ids=lambda row: row.key)
def test_a_junk_queue_option_raises_one_of_the_ids_its_row_lists(row: Setting) -> None:
    found = {m.id for m in problems({"REDIS_URL": URL, "QUEUES": {"q": {row.key: object()}}})}
    assert found and found <= set(row.checks), found


def test_every_check_id_of_the_conf_package_is_listed_by_a_row() -> None:
    source = "".join(p.read_text() for p in Path(django_rqueue.conf.__file__).parent.glob("*.py"))
    raised = set(re.findall(r'"(rqueue\.[EW]\d{3})"', source))
    listed = {i for row in ALL_ROWS for i in row.checks} | set(GENERAL_CHECKS)
    assert raised <= listed, raised - listed


def test_the_keys_checked_with_others_are_rows_and_every_key_is_one_row() -> None:
    assert set(WITH_OTHERS) <= TOP_LEVEL_KEYS
    keys = [row.key for row in SETTINGS]
    assert len(keys) == len(set(keys))


def test_the_job_record_defaults_are_the_settings_defaults() -> None:
    assert RECORD_DEFAULTS == {
        JobFields.MAX_ATTEMPTS: defaults.MAX_ATTEMPTS,
        JobFields.TIMEOUT_MS: defaults.TIMEOUT * 1000,
        JobFields.RESULT_TTL: defaults.RESULT_TTL,
    }
