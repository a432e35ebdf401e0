"""A private Redis Sentinel deployment for tests: a master, a replica and three sentinels.

Usage::

    with SentinelSet().start() as deployment:
        settings.RQUEUE = {"SENTINELS": deployment.addresses, "REDIS_URL": deployment.url(0)}
        old = deployment.master_address()
        deployment.master.kill9()                # a crash of the master
        new = deployment.wait_failover(old)      # the sentinels promoted the replica
        deployment.server_at(new).client()       # a client of the new master

Every process is a :class:`~tests.support.redis_server.RedisServer` (free port,
no persistence, ``PR_SET_PDEATHSIG``, stopped by pid at :meth:`SentinelSet.close`
or interpreter exit). The replica starts with ``--replicaof`` the master; each
sentinel runs ``redis-server <its config> --sentinel`` with a writable config
file in its own temp dir (Sentinel rewrites it) monitoring the master under
:data:`SERVICE` with quorum 2, ``down-after-milliseconds`` 1000,
``failover-timeout`` 5000 and ``parallel-syncs`` 1, so a failover after a
``kill -9`` of the master takes about 2-4 s. :meth:`SentinelSet.start` returns
once every sentinel sees the replica (up) and the two other sentinels.
``SentinelSet(sentinels=0)`` is plain replication: the master and its
replica, in sync, without sentinels.
"""

from __future__ import annotations

from typing import Any, Self

import redis

from .redis_server import NO_RETRY, RedisServer
from .waiting import wait_until

#: The name the sentinels monitor the master under (the host part of the REDIS_URL).
SERVICE = "mymaster"
#: Seconds :meth:`SentinelSet.start` waits for the sentinels to discover each other.
DISCOVERY_TIMEOUT = 20.0
#: Seconds :meth:`SentinelSet.wait_failover` waits for a promotion.
FAILOVER_TIMEOUT = 30.0
#: The key the replica's acknowledgements are probed with (written then deleted, db 0).
PROBE = "redis-sentinel-set:probe"
#: Full syncs start at once (Redis 7 waits 5 s for more replicas to join a diskless sync).
NO_SYNC_DELAY = ("--repl-diskless-sync-delay", "0")

Address = tuple[str, int]


class SentinelServer(RedisServer):
    """A ``redis-server <config> --sentinel`` process; its config monitors ``master_port``."""

    def __init__(
        self,
        master_port: int,
        *,
        service: str = SERVICE,
        quorum: int = 2,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 5000,
    ) -> None:
        super().__init__()
        self.config = self.dir / "sentinel.conf"
        self.config.write_text(
            f"sentinel monitor {service} 127.0.0.1 {master_port} {quorum}\n"
            f"sentinel down-after-milliseconds {service} {down_after_ms}\n"
            f"sentinel failover-timeout {service} {failover_timeout_ms}\n"
            f"sentinel parallel-syncs {service} 1\n"
        )

    def _build_argv(self, port: int) -> list[str]:
        argv = super()._build_argv(port)
        # redis-server reads a config file only as its first argument.
        return [argv[0], str(self.config), "--sentinel", *argv[1:]]


class SentinelSet:
    """A master, one replica and ``sentinels`` sentinels on 127.0.0.1 (see the module docstring)."""

    def __init__(
        self,
        *,
        service: str = SERVICE,
        sentinels: int = 3,
        quorum: int = 2,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 5000,
    ) -> None:
        self.service = service
        self.quorum = quorum
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.sentinel_count = sentinels
        self.master = RedisServer(NO_SYNC_DELAY)
        self.replica: RedisServer | None = None
        self.sentinels: list[SentinelServer] = []

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> Self:
        """Start the master, the replica and the sentinels; wait until they all know each other."""
        try:
            self.master.start()
            self.replica = RedisServer(
                ["--replicaof", "127.0.0.1", str(self.master.port), *NO_SYNC_DELAY]
            )
            self.replica.start()
            for _ in range(self.sentinel_count):
                sentinel = SentinelServer(
                    self.master.port,
                    service=self.service,
                    quorum=self.quorum,
                    down_after_ms=self.down_after_ms,
                    failover_timeout_ms=self.failover_timeout_ms,
                )
                self.sentinels.append(sentinel)
                sentinel.start()
            wait_until(
                self._replica_online,
                timeout=DISCOVERY_TIMEOUT,
                interval=0.02,
                message="the replica did not sync with the master",
            )
            wait_until(
                self._discovered,
                timeout=DISCOVERY_TIMEOUT,
                interval=0.05,
                message="the sentinels did not see the replica and each other",
            )
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop every process (by pid) and remove their temp dirs. Safe to call repeatedly."""
        for server in [*self.sentinels, self.replica, self.master]:
            if server is not None:
                server.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- addresses -------------------------------------------------------------

    @property
    def addresses(self) -> list[Address]:
        """``(host, port)`` of every sentinel: ``RQUEUE["SENTINELS"]``."""
        return [("127.0.0.1", s.port) for s in self.sentinels]

    def url(self, db: int = 0) -> str:
        """``redis://<service>/<db>``: the ``REDIS_URL`` of a deployment behind these sentinels."""
        return f"redis://{self.service}/{db}"

    @property
    def servers(self) -> list[RedisServer]:
        """The data nodes (master and replica, whatever their role is now)."""
        return [s for s in (self.master, self.replica) if s is not None]

    def server_at(self, address: Address) -> RedisServer:
        """The data node listening on ``address``."""
        for server in self.servers:
            if ("127.0.0.1", server.port) == address:
                return server
        raise LookupError(f"no data node of this set listens on {address}")

    def master_address(self) -> Address:
        """The master's address as the first sentinel that answers reports it."""
        for sentinel in self.sentinels:
            state = self._sentinel_master(sentinel)
            if state is not None:
                return str(state["ip"]), int(state["port"])
        raise LookupError("no sentinel answers")

    def promoted(self, old: Address) -> Address | None:
        """The new master's address once every live sentinel names the same master other than
        ``old`` and that server says it is a master; ``None`` until then."""
        seen = {
            (str(state["ip"]), int(state["port"]))
            for sentinel in self.sentinels
            if sentinel.is_alive() and (state := self._sentinel_master(sentinel)) is not None
        }
        if len(seen) != 1:
            return None
        (address,) = seen
        if address == old:
            return None
        role = self._info(self.server_at(address), "replication").get("role")
        return address if role == "master" else None

    def wait_failover(self, old: Address, timeout: float = FAILOVER_TIMEOUT) -> Address:
        """Until :meth:`promoted` names a new master; returns its address."""
        found = wait_until(
            lambda: self.promoted(old),
            timeout=timeout,
            interval=0.05,
            message=f"no failover away from {old}",
        )
        assert found is not None  # wait_until returns a truthy value
        return found

    # -- internals -------------------------------------------------------------

    def _replica_online(self) -> bool:
        """The replica is in sync and acknowledges writes: ``WAIT 1`` confirms a probe write
        (just after its first sync a replica takes up to a second to send acks)."""
        if self._info(self.replica, "replication").get("master_link_status") != "up":
            return False
        try:
            with self.master.client(retry=NO_RETRY, socket_timeout=1) as conn:
                pipe = conn.pipeline(transaction=False)
                pipe.set(PROBE, 1)
                pipe.delete(PROBE)
                pipe.wait(1, 100)
                return bool(pipe.execute()[-1] == 1)
        except redis.RedisError:
            return False

    def _discovered(self) -> bool:
        for sentinel in self.sentinels:
            state = self._sentinel_master(sentinel)
            if state is None or int(state.get("num-other-sentinels", 0)) < len(self.sentinels) - 1:
                return False
            try:
                with sentinel.client(retry=NO_RETRY, socket_timeout=1) as conn:
                    replicas = conn.sentinel_slaves(self.service)
            except redis.RedisError:
                return False
            if not any(not r["is_sdown"] and not r["is_odown"] for r in replicas):
                return False
        return True

    def _sentinel_master(self, sentinel: SentinelServer) -> dict[str, Any] | None:
        try:
            with sentinel.client(retry=NO_RETRY, socket_timeout=1) as conn:
                state: dict[str, Any] = conn.sentinel_master(self.service)
        except redis.RedisError:
            return None
        return state

    @staticmethod
    def _info(server: RedisServer | None, section: str) -> dict[str, Any]:
        if server is None or not server.is_alive():
            return {}
        try:
            with server.client(retry=NO_RETRY, socket_timeout=1) as conn:
                info: dict[str, Any] = conn.info(section)
        except redis.RedisError:
            return {}
        return info


def sentinel_settings(deployment: SentinelSet, db: int = 0, **extra: Any) -> dict[str, Any]:
    """``RQUEUE`` keys for ``deployment``: ``SENTINELS``, ``REDIS_URL`` (db ``db``), ``extra``."""
    return {"SENTINELS": deployment.addresses, "REDIS_URL": deployment.url(db), **extra}
