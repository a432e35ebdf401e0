"""worker.reconnect: the delays between attempts to reach an unreachable Redis."""

from __future__ import annotations

import pytest

from django_rqueue.worker.reconnect import Reconnect


def test_delays_double_with_equal_jitter_up_to_the_cap_and_reset_after_a_success():
    reconnect = Reconnect(base=0.1, cap=1.0)
    delays = [reconnect.next_delay() for _ in range(8)]
    ceilings = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]
    for delay, ceiling in zip(delays, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling
    reconnect.reset()
    assert 0.05 <= reconnect.next_delay() <= 0.1


def test_the_delays_are_jittered():
    reconnect = Reconnect(base=1.0, cap=1.0)
    assert len({reconnect.next_delay() for _ in range(20)}) > 1


def test_a_long_outage_never_overflows():
    reconnect = Reconnect()
    for _ in range(5000):
        assert reconnect.next_delay() <= 5.0


@pytest.mark.parametrize(("base", "cap"), [(0, 1), (2, 1), (-1, 1)])
def test_base_and_cap_are_checked(base: float, cap: float):
    with pytest.raises(ValueError, match="base"):
        Reconnect(base=base, cap=cap)
