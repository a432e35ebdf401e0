"""``--queues`` parsing and the order a worker tries its queues in (worker/weights.py)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from django_rqueue.worker.weights import QueueOrder, QueueSelection, parse_queues

WEIGHTS = {"high": 5, "default": 3, "low": 1}


def shares(counts: Counter[str]) -> dict[str, float]:
    total = sum(counts.values())
    return {q: counts[q] / total for q in WEIGHTS}


def expected() -> dict[str, float]:
    return {q: w / sum(WEIGHTS.values()) for q, w in WEIGHTS.items()}


def within_10_percent(got: dict[str, float]) -> bool:
    return all(abs(got[q] - share) <= 0.1 * share for q, share in expected().items())


def test_a_plain_list_is_strict_and_a_weighted_one_keeps_its_order():
    assert parse_queues("a, b ,c") == QueueSelection(("a", "b", "c"))
    assert parse_queues("high:5,default:3,low:1") == QueueSelection(
        ("high", "default", "low"), {"high": 5, "default": 3, "low": 1}
    )
    assert parse_queues(" x : 2 ") == QueueSelection(("x",), {"x": 2})


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "name at least one queue"),
        (" , ", "name at least one queue"),
        ("a,,b", "empty queue name"),
        (":3", "empty queue name"),
        ("a,b,a", "queue 'a' is named twice"),
        ("a:1,a:2", "queue 'a' is named twice"),
        ("a:0", "weight of queue 'a' must be an integer >= 1, got '0'"),
        ("a:-1", "must be an integer >= 1, got '-1'"),
        ("a:1.5", "must be an integer >= 1, got '1.5'"),
        ("a:x", "must be an integer >= 1, got 'x'"),
        ("a:", "must be an integer >= 1, got ''"),
        ("a:2,b", r"give every queue a weight or none \(no weight: b\)"),
    ],
)
def test_bad_queue_lists_say_what_is_wrong(text: str, error: str):
    with pytest.raises(ValueError, match=error):
        parse_queues(text)


def test_strict_order_never_changes_and_takes_whole_batches():
    order = QueueOrder(["a", "b", "c"])
    assert order.strict
    assert all(order.order() == ["a", "b", "c"] for _ in range(100))
    assert (order.pick(), order.run("a", 20), order.continue_with("a", 20)) == ("a", 20, 20)
    assert order.quotas(10) is None
    assert order.leads("a") and not order.leads("b")


def test_weights_must_match_the_queues():
    with pytest.raises(ValueError, match="do not match"):
        QueueOrder(["a", "b"], {"a": 1})
    with pytest.raises(ValueError, match=">= 1"):
        QueueOrder(["a"], {"a": 0})


def test_each_queue_comes_first_in_proportion_to_its_weight_and_every_queue_is_tried():
    order = QueueOrder(list(WEIGHTS), WEIGHTS, rng=random.Random(12))
    firsts: Counter[str] = Counter()
    for _ in range(9000):
        tried = order.order()
        assert sorted(tried) == sorted(WEIGHTS)  # an empty first choice hands over
        firsts[tried[0]] += 1
    assert within_10_percent(shares(firsts)), shares(firsts)


def test_batches_and_acks_that_reserve_ahead_keep_the_shares():
    """A worker taking runs of one queue (batches, ack_reserve) under a full backlog:
    one draw per job, so the shares still follow the weights."""
    order = QueueOrder(list(WEIGHTS), WEIGHTS, rng=random.Random(7))
    served: Counter[str] = Counter()
    queue = order.order()[0]
    while sum(served.values()) < 9000:
        taken = order.run(queue, 20)  # a batch of the queue the fetch picked
        served[queue] += taken
        more = order.continue_with(queue, 20)  # the last job's ack reserves ahead...
        if more:
            served[queue] += more
        queue = order.order()[0]  # ...or the next fetch starts where the draw pointed
    assert within_10_percent(shares(served)), shares(served)
    assert served["low"] > 0


def test_a_run_that_ignored_its_breaking_draw_would_favour_heavy_queues():
    """The control for the test above: dropping the draw that ends a run tilts the shares."""
    rng = random.Random(7)
    served: Counter[str] = Counter()
    while sum(served.values()) < 9000:
        order = QueueOrder(list(WEIGHTS), WEIGHTS, rng=rng)  # nothing carried over
        queue = order.order()[0]
        served[queue] += order.run(queue, 20)
    assert not within_10_percent(shares(served)), shares(served)


def test_quotas_split_free_slots_by_the_weights():
    order = QueueOrder(list(WEIGHTS), WEIGHTS, rng=random.Random(3))
    quotas = order.quotas(9000)
    assert quotas is not None and sum(quotas.values()) == 9000
    assert within_10_percent(shares(quotas)), shares(quotas)
