"""A worker's settings (django_rqueue.worker.settings): checked once, resolved from RQUEUE."""

from __future__ import annotations

import pytest

from django_rqueue.worker.settings import WorkerSettings


def test_checked_settings_take_the_async_concurrency_of_rqueue_when_unset() -> None:
    given = WorkerSettings(("default", "low"), weights={"default": 2, "low": 1}, burst=True)
    checked = given.checked()
    assert checked.async_concurrency == 1  # RQUEUE["ASYNC_CONCURRENCY"] unset
    assert checked.async_slots == given.async_slots == 1
    assert (checked.queues, checked.weights, checked.burst) == (given.queues, given.weights, True)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (WorkerSettings(("nowhere",)), "not declared"),
        (WorkerSettings(("default",), weights={"low": 1}), "do not match"),
        (WorkerSettings(("default",), async_concurrency=0), "must be >= 1"),
    ],
)
def test_wrong_settings_are_refused(wrong: WorkerSettings, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        wrong.checked()
