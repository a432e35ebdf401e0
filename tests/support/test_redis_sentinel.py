"""Tests for the test harness itself: the private Sentinel deployment (SentinelSet)."""

from tests.support.redis_sentinel import SERVICE, SentinelSet


def test_a_sentinel_set_starts_discovered_and_stops_every_process() -> None:
    deployment = SentinelSet().start()
    try:
        assert deployment.replica is not None
        assert deployment.master_address() == ("127.0.0.1", deployment.master.port)
        assert deployment.url(3) == f"redis://{SERVICE}/3"
        assert len(deployment.addresses) == 3
        for sentinel in deployment.sentinels:
            with sentinel.client() as conn:
                state = conn.sentinel_master(SERVICE)
                replicas = conn.sentinel_slaves(SERVICE)
            assert state["num-other-sentinels"] == 2
            assert [r["port"] for r in replicas] == [deployment.replica.port]
        assert deployment.replica.client().info("replication")["role"] == "slave"
    finally:
        deployment.close()
    processes = [deployment.master, deployment.replica, *deployment.sentinels]
    assert not any(p is not None and p.is_alive() for p in processes)
