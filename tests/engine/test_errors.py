"""What redis-py's errors amount to (django_rqueue.engine.errors): pure, no Redis."""

import pytest
import redis

from django_rqueue.engine.errors import unavailable
from django_rqueue.exceptions import RedisUnavailable, SlotMoving


@pytest.mark.parametrize(
    "error",
    [
        redis.exceptions.TryAgainError("Multiple keys request during rehashing of slot"),
        redis.exceptions.AskError("11958 127.0.0.1:7001"),
        redis.exceptions.MovedError("11958 127.0.0.1:7001"),
        redis.exceptions.ClusterError("TTL exhausted."),
        redis.exceptions.ClusterDownError("The cluster is down"),
        redis.exceptions.SlotNotCoveredError("Slot 11958 not covered by the cluster."),
        redis.exceptions.RedisClusterException("startup_nodes could not agree on a valid slots"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_a_clusters_replies_while_a_slot_moves_are_redis_unavailable(error: Exception) -> None:
    found = unavailable(error)
    assert isinstance(found, RedisUnavailable)
    assert str(error) in str(found)
    # One slot (that queue alone), or the whole cluster (its slot map cannot be read).
    whole = (redis.exceptions.ClusterDownError, redis.exceptions.RedisClusterException)
    one_slot = type(error) not in whole
    assert isinstance(found, SlotMoving) == one_slot


def test_other_error_replies_are_not_redis_unavailable() -> None:
    assert unavailable(redis.ResponseError("ERR rqueue enqueue: bad priority 101")) is None
