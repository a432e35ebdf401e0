"""A private, throw-away Redis Cluster of three masters (no replicas) for tests.

Usage::

    with LocalCluster() as cluster:
        client = cluster.client()          # redis.cluster.RedisCluster
        cluster.url                        # "redis://127.0.0.1:<port of node 0>/0"
        cluster.move_slot(slot, 2)         # live resharding of one slot to node 2
        cluster.reshard(1, 2)              # redis-cli --cluster reshard, its defaults: slot moved
        with cluster.half_moved(slot, 2):  # IMPORTING/MIGRATING, 10 keys moved, until the end
            ...
        cluster.flush()                    # FLUSHALL on every master
        cluster.restore_slots()            # every slot moved back where it started

Three :class:`~tests.support.redis_server.RedisServer` processes with
``--cluster-enabled yes`` (each its own ``nodes.conf`` in its temp dir), joined
by ``redis-cli --cluster create`` (its slots split evenly), ready once every
node reports ``cluster_state:ok``. Stopped by pid with the servers.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

import redis
from redis.cluster import RedisCluster

from .redis_server import RedisServer, RedisServerError

#: Seconds the cluster gets to agree on its configuration.
READY_TIMEOUT = 20.0
#: Keys moved per MIGRATE while resharding a slot.
MIGRATE_BATCH = 100


#: A node's cluster bus listens on its port + 10000 (Redis Cluster spec), so ports stay below
#: 55535 and both must be free: they are drawn from this range, below Linux's ephemeral ports.
PORTS = range(20000, 30000)


def cluster_port() -> int:
    """A port free for a cluster node and its bus (port + 10000)."""
    for _ in range(100):
        port = random.choice(PORTS)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port
    raise RedisServerError("no free port pair for a cluster node")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class LocalCluster:
    """Three cluster-enabled redis-server masters on free 127.0.0.1 ports."""

    def __init__(self, masters: int = 3) -> None:
        self.nodes = [
            RedisServer(
                [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ],
                port_picker=cluster_port,
            )  # fmt: skip
            for _ in range(masters)
        ]
        #: The first master of each slot :meth:`move_slot` moved.
        self._homes: dict[int, int] = {}

    @property
    def url(self) -> str:
        """A URL of one node (the cluster client discovers the others)."""
        return self.nodes[0].url

    def start(self) -> Self:
        for node in self.nodes:
            node.start()
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RedisServerError("redis-cli not found on PATH (apt-get install redis-tools)")
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run(
            [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        deadline = time.monotonic() + READY_TIMEOUT
        while not all(self._state_ok(node) for node in self.nodes):
            if time.monotonic() > deadline:
                raise RedisServerError("the cluster did not reach cluster_state:ok")
            time.sleep(0.05)
        return self

    def client(self, **kwargs: Any) -> RedisCluster:
        """A new cluster client (the caller closes it)."""
        return RedisCluster(host="127.0.0.1", port=self.nodes[0].port, **kwargs)

    def node_of(self, slot: int) -> int:
        """Index in :attr:`nodes` of the master serving ``slot``."""
        with self.nodes[0].client() as conn:
            for start, end, master, *_ in conn.execute_command("CLUSTER SLOTS"):
                if start <= slot <= end:
                    port = int(master[1])
                    return next(i for i, n in enumerate(self.nodes) if n.port == port)
        raise LookupError(f"no node serves slot {slot}")

    def flush(self) -> None:
        """Delete every key on every master."""
        for node in self.nodes:
            with node.client() as conn:
                conn.flushall()

    def move_slot(
        self, slot: int, target: int, *, pause: float = 0.0, batch: int | None = MIGRATE_BATCH
    ) -> int:
        """Move ``slot`` to node ``target`` live, the way ``redis-cli --cluster reshard`` does
        (``CLUSTER SETSLOT IMPORTING/MIGRATING``, ``MIGRATE`` in batches of ``batch`` keys,
        then ``SETSLOT NODE`` everywhere); clients meanwhile get ``ASK``/``MOVED``. ``pause``
        seconds are slept between batches to widen the window. ``batch=None`` moves every
        key of the slot in one ``MIGRATE`` (``redis-cli --cluster reshard
        --cluster-pipeline N`` with N above the slot's key count). Returns the number of
        keys moved."""
        source = self.node_of(slot)
        if source == target:
            return 0
        self._homes.setdefault(slot, source)
        src, dst = self.nodes[source], self.nodes[target]
        with src.client() as s, dst.client() as d:
            src_id, dst_id = s.execute_command("CLUSTER MYID"), d.execute_command("CLUSTER MYID")
            d.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
            s.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
            moved = 0
            count = batch or max(1, int(s.execute_command("CLUSTER COUNTKEYSINSLOT", slot)))
            while keys := s.execute_command("CLUSTER GETKEYSINSLOT", slot, count):
                s.execute_command(
                    "MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *keys
                )  # fmt: skip
                moved += len(keys)
                if pause:
                    time.sleep(pause)
            for node in self.nodes:
                with node.client() as conn:
                    conn.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)
        return moved

    @contextmanager
    def half_moved(self, slot: int, target: int, batch: int = 10) -> Iterator[None]:
        """Keep ``slot`` half moved to node ``target`` while the block runs: ``IMPORTING`` and
        ``MIGRATING`` set and one ``MIGRATE`` of ``batch`` keys done (as a reshard that is
        under way); then the rest of its keys moved and the slot given to ``target``."""
        source = self.node_of(slot)
        if source == target:
            raise ValueError(f"slot {slot} is on node {target} already")
        self._homes.setdefault(slot, source)
        src, dst = self.nodes[source], self.nodes[target]
        with src.client() as s, dst.client() as d:
            src_id, dst_id = s.execute_command("CLUSTER MYID"), d.execute_command("CLUSTER MYID")
            d.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
            s.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
            count = batch
            try:
                if keys := s.execute_command("CLUSTER GETKEYSINSLOT", slot, count):
                    s.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *keys)
                yield
            finally:
                count = 1000
                while keys := s.execute_command("CLUSTER GETKEYSINSLOT", slot, count):
                    s.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *keys)
                for node in self.nodes:
                    with node.client() as conn:
                        conn.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)

    def slots_of(self, node: int) -> list[int]:
        """The slots master ``node`` (an index in :attr:`nodes`) serves, lowest first."""
        port = self.nodes[node].port
        with self.nodes[0].client() as conn:
            ranges = conn.execute_command("CLUSTER SLOTS")
        return sorted(
            slot
            for start, end, master, *_ in ranges
            if int(master[1]) == port
            for slot in range(start, end + 1)
        )

    def reshard(self, source: int, target: int) -> int:
        """Move one slot from master ``source`` to master ``target`` with ``redis-cli --cluster
        reshard ... --cluster-slots 1 --cluster-yes`` and its defaults (``MIGRATE`` in batches
        of 10 keys, ``--cluster-pipeline``'s default); it moves the lowest slot of ``source``,
        which is returned (:meth:`restore_slots` moves it back)."""
        slot = self.slots_of(source)[0]
        self._homes.setdefault(slot, source)
        with self.nodes[source].client() as s, self.nodes[target].client() as d:
            src_id, dst_id = s.execute_command("CLUSTER MYID"), d.execute_command("CLUSTER MYID")
        cli = shutil.which("redis-cli") or "redis-cli"
        subprocess.run(
            [
                cli, "--cluster", "reshard", f"127.0.0.1:{self.nodes[source].port}",
                "--cluster-from", _text(src_id), "--cluster-to", _text(dst_id),
                "--cluster-slots", "1", "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )  # fmt: skip
        return slot

    def restore_slots(self) -> None:
        """Move every slot :meth:`move_slot` moved back to its first master (a session
        cluster shared by tests starts each with the slot map it was created with)."""
        for slot, home in list(self._homes.items()):
            self.move_slot(slot, home, batch=None)
        self._homes.clear()

    def close(self) -> None:
        for node in self.nodes:
            node.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def _state_ok(node: RedisServer) -> bool:
        try:
            with node.client(socket_timeout=1) as conn:
                return bool(conn.cluster("INFO")["cluster_state"] == "ok")
        except redis.RedisError:
            return False
