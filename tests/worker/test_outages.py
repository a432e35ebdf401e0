"""worker.outages: the servers (and cluster slots) a worker process leaves out for now."""

from __future__ import annotations

from django_rqueue.exceptions import RedisUnavailable, SlotMoving
from django_rqueue.worker.outages import Outages


class Clock:
    """A ``time.monotonic()`` the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_failed_server_is_left_out_until_its_retry_time_then_a_success_clears_it():
    clock = Clock()
    outages = Outages(clock)
    delay = outages.failed("cluster", queue="a", error=RedisUnavailable("down"))
    assert not outages.usable("cluster") and not outages.usable("cluster", "b")
    clock.now += delay
    assert outages.usable("cluster", "a")
    assert outages.recovered("cluster", "a")
    assert outages.down() == []


def test_a_moving_slot_leaves_out_its_queue_alone():
    clock = Clock()
    outages = Outages(clock)
    delay = outages.failed("cluster", queue="a", error=SlotMoving("TTL exhausted"))
    assert not outages.usable("cluster", "a")
    assert outages.usable("cluster", "b") and outages.usable("cluster")
    assert not outages.recovered("cluster", "b")
    clock.now += delay
    assert outages.usable("cluster", "a")
    assert outages.recovered("cluster", "a")
    assert outages.down() == []
