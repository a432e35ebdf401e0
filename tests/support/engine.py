"""The transition tests' driver: :class:`Engine`, a thin layer over the engine's transitions.

The driver calls the real Lua scripts on the session's redis-server; it only
fills in the boring arguments (jobs are enqueued through
``tests.support.jobs_in_state``), reads back structures, and checks the
queue's invariants after a test has moved jobs around: the key schema of
``docs/explanation/data-model.md`` holds together, and every job sits in exactly the
structure its state names (:meth:`Engine.check_invariants`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from django_rqueue.engine.calls import CancelMode, Retention
from django_rqueue.engine.connection import is_cluster
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.execution import error_record
from tests.support import transitions
from tests.support.jobs_in_state import Jobs, retention

#: Fields enqueue_job.lua leaves out of a job hash while they hold their default.
OMITTED_DEFAULTS = {"prio": "0", "group": "", "attempts": "0", "token": "0"}
PREFIX = "rqueue"  # tests/settings.py leaves KEY_PREFIX at its default
QUEUE = "default"


def _s(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class Engine:
    """Calls transitions on one queue and inspects what they wrote."""

    client: redis.Redis
    keys: QueueKeys
    queue: str = QUEUE

    # -- transitions ------------------------------------------------------

    def enqueue(
        self,
        *,
        job_id: str | None = None,
        priority: int = 0,
        group: str = "",
        delay_ms: int = 0,
        run_at_ms: int = -1,
        unique_key: str = "",
        unique_ttl: int = 0,
        max_attempts: int | None = 3,
        name: str = "tests.noop",
        payload: str = '{"a":[],"k":{}}',
        ttl: int | None = 600,
        expires_in_ms: int = -1,
        expires_at_ms: int = -1,
    ) -> tuple[str, str, str]:
        return Jobs(self.client).enqueue(
            queue=self.queue,
            job_id=job_id,
            priority=priority,
            group=group,
            delay_ms=delay_ms,
            run_at_ms=run_at_ms,
            unique_key=unique_key,
            unique_ttl=unique_ttl,
            max_attempts=max_attempts,
            name=name,
            payload=payload,
            ttl=ttl,
            expires_in_ms=expires_in_ms,
            expires_at_ms=expires_at_ms,
        )

    def add(self, **kwargs: Any) -> str:
        """Enqueue and return the new job's id (asserting it was created)."""
        outcome, job_id, _state = self.enqueue(**kwargs)
        assert outcome == "created"
        return job_id

    def reserve(
        self, lease_ms: int = 30_000, *, cap: int | None = None
    ) -> tuple[str, dict[str, str]] | None:
        """Reserve one job; ``cap``: the queue's ``group_concurrency`` (``None``: no cap)."""
        got = transitions.reserve(
            self.client, self.keys, lease_ms=lease_ms, worker_id="w1", group_concurrency=cap
        )
        if got is None:
            return None
        job_id, fields = got
        return job_id, {_s(k): _s(v) for k, v in fields.items()}

    def reserve_id(self, lease_ms: int = 30_000, *, cap: int | None = None) -> str:
        got = self.reserve(lease_ms, cap=cap)
        assert got is not None, "nothing to reserve"
        return got[0]

    def drain(self, *, cap: int | None = None) -> list[str]:
        """Reserve until nothing comes back; return the ids in reservation order."""
        order = []
        while (got := self.reserve(cap=cap)) is not None:
            order.append(got[0])
        return order

    def ack(self, job_id: str, token: int | None = None, result: str = "null") -> None:
        token = self.token(job_id) if token is None else token
        transitions.ack(self.client, self.keys, job_id, token, result, 600)

    def fail(
        self,
        job_id: str,
        *,
        token: int | None = None,
        retry_ms: int = -1,
        error: str | None = None,
        kept: Retention | None = None,
    ) -> tuple[str, int | None]:
        """``kept``: the failed store's retention (default: the queue's settings)."""
        token = self.token(job_id) if token is None else token
        error = error or error_record(RuntimeError("boom"), "Traceback: boom\n")
        kept = kept or retention(self.queue)
        return transitions.fail(
            self.client, self.keys, job_id, token, error, retry_ms, retention=kept
        )

    def release(self, job_id: str, token: int | None = None) -> None:
        token = self.token(job_id) if token is None else token
        transitions.release(self.client, self.keys, job_id, token)

    def promote(self, limit: int = 500) -> tuple[int, int]:
        return transitions.promote_due(self.client, self.keys, limit)

    def reclaim(self, limit: int = 500, kept: Retention | None = None) -> tuple[int, int, int]:
        err = error_record(RuntimeError("lease expired"))
        kept = kept or retention(self.queue)
        return transitions.reclaim_expired(self.client, self.keys, limit, err, retention=kept)

    def trim(self, kept: Retention) -> tuple[int, bool]:
        return transitions.trim_failed(self.client, self.keys, kept)

    def cancel(self, job_id: str, mode: CancelMode = "cancel") -> str:
        return transitions.cancel(self.client, self.keys, job_id, mode=mode, ttl=600)

    # -- reading ------------------------------------------------------------

    def server(self) -> redis.Redis:
        """A client of the one server that holds the queue: in a cluster, the master of its
        slot (for per-server commands: INFO, CONFIG, a pipeline of script calls)."""
        if not is_cluster(self.client):
            return self.client
        cluster: Any = self.client
        node: redis.Redis = cluster.get_redis_connection(cluster.get_node_from_key(self.keys.base))
        return node

    def now_ms(self) -> int:
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def job(self, job_id: str) -> dict[str, str]:
        """The job hash, with the fields enqueue leaves out at their default filled in
        (as every reader does); :meth:`job_like` reads it raw."""
        raw = self.job_like(self.keys.job(job_id))
        if not raw:
            return raw
        # "due" is left out while it equals "at" (a job queued to run now).
        return {**OMITTED_DEFAULTS, "due": raw.get("at", ""), **raw}

    def state(self, job_id: str) -> str | None:
        value = self.client.hget(self.keys.job(job_id), "s")
        return None if value is None else _s(value)

    def token(self, job_id: str) -> int:
        return int(self.job(job_id)["token"])

    def zset(self, key: str) -> dict[str, float]:
        pairs: list[tuple[bytes, float]] = self.client.zrange(key, 0, -1, withscores=True)  # type: ignore[assignment]
        return {_s(m): s for m, s in pairs}

    def lrange(self, key: str) -> list[str]:
        return [_s(v) for v in self.client.lrange(key, 0, -1)]

    def stats(self) -> dict[str, int]:
        return {_s(k): int(v) for k, v in self.client.hgetall(self.keys.stats).items()}

    def group_of(self, job_id: str) -> str:
        return self.job(job_id)["group"]

    def running_per_group(self) -> dict[str, int]:
        """The ``grouprun`` hash: group -> running jobs holding one of its slots."""
        return {_s(k): int(v) for k, v in self.client.hgetall(self.keys.grouprun).items()}

    def full_groups(self) -> set[str]:
        return {_s(g) for g in self.client.smembers(self.keys.groupfull)}

    def parked(self, group: str) -> set[int]:
        """The priorities at which ``group`` is parked (at its cap, out of the rings)."""
        return {int(p) for p in self.client.smembers(self.keys.parked(group))}

    def snapshot(self) -> dict[str, Any]:
        """Every key of the queue with its full content, except the wake-up lists and
        the reservation records (they expire with a lease, on their own)."""
        out: dict[str, Any] = {}
        for raw in self.client.scan_iter(match=f"{PREFIX}:*", count=1000):
            key = _s(raw)
            if key in (self.keys.notify, self.keys.wake) or key.startswith(
                self.keys.reservation("")
            ):
                continue
            kind = _s(self.client.type(key))
            if kind == "hash":
                out[key] = self.job_like(key)
            elif kind == "zset":
                out[key] = self.zset(key)
            elif kind == "list":
                out[key] = self.lrange(key)
            else:
                out[key] = (kind, self.client.dump(key))
        return out

    def job_like(self, key: str) -> dict[str, str]:
        return {_s(k): _s(v) for k, v in self.client.hgetall(key).items()}

    def check_invariants(self) -> None:
        """Assert the structures agree with each other and with the job states.

        Every priority in ``prios`` has a non-empty ring, every group in a ring a
        non-empty FIFO of queued jobs of that priority and group, and no list lies
        outside them but the parked ones (group concurrency: a group at its cap,
        in ``groupfull``, parked at that priority, and then in no ring there);
        the ``queued`` counter matches; each job hash is in exactly
        the structure of its state (queued: a group list, scheduled: ``delayed``,
        running: ``reserved``, failed: ``failed``), and in none otherwise. A
        ``Job.wait`` wake-up list (``done:<id>``) always expires. ``grouprun``
        counts exactly the running jobs that hold a group slot (field ``gc``),
        and only jobs that run hold one.
        """
        k = self.keys
        prios = self.zset(k.prios)
        queued_ids: list[str] = []
        for prio in prios:
            ring = self.lrange(k.ring(int(prio)))
            assert ring, f"priority {prio} is in prios but its ring is empty"
            assert len(ring) == len(set(ring)), f"ring {prio} lists a group twice: {ring}"
            for group in ring:
                ids = self.lrange(k.group(int(prio), group))
                assert ids, f"group {group!r} is in ring {prio} but its list is empty"
                for job_id in ids:
                    job = self.job(job_id)
                    assert job["s"] == "queued", (job_id, job)
                    assert (job["prio"], job["group"]) == (prio, group)
                queued_ids += ids
        # No non-empty group list or ring outside what prios points at, but parked ones.
        full = self.full_groups()
        for raw in self.client.scan_iter(match=f"{k.base}group:*", count=1000):
            key = _s(raw)
            prio, group = key[len(k.base) + len("group:") :].split(":", 1)
            ring = self.lrange(k.ring(int(prio))) if prio in prios else []
            if int(prio) in self.parked(group):
                assert group in full, f"{group!r} is parked at {prio} but not full"
                assert group not in ring, f"{group!r} is parked at {prio} and in its ring"
                ids = self.lrange(key)
                for job_id in ids:
                    job = self.job(job_id)
                    assert job["s"] == "queued", (job_id, job)
                    assert (job["prio"], job["group"]) == (prio, group)
                queued_ids += ids
            else:
                assert group in ring, key
        for raw in self.client.scan_iter(match=f"{k.base}parked:*", count=1000):
            parked = _s(raw)[len(k.base) + len("parked:") :]
            for level in self.parked(parked):
                assert self.client.exists(k.group(level, parked)), (parked, level)
        # Group slots: held by running jobs only, and counted exactly.
        held: dict[str, int] = {}
        for raw in self.client.scan_iter(match=f"{k.base}job:*", count=1000):
            state, slot, holder = self.client.hmget(raw, "s", "gc", "group")
            if slot is not None:
                assert state == b"running", (_s(raw), state)
                name = _s(holder or b"")
                held[name] = held.get(name, 0) + 1
        assert self.running_per_group() == held
        assert full <= set(held), (full, held)
        for raw in self.client.scan_iter(match=f"{k.base}ring:*", count=1000):
            assert _s(raw)[len(k.base) + len("ring:") :] in prios, _s(raw)
        assert len(queued_ids) == len(set(queued_ids))
        assert self.stats().get("queued", 0) == len(queued_ids)
        for key, state in ((k.delayed, "scheduled"), (k.reserved, "running"), (k.failed, "failed")):
            for job_id in self.zset(key):
                assert self.state(job_id) == state, (key, job_id, self.state(job_id))
        for raw in self.client.scan_iter(match=f"{k.base}done:*", count=1000):
            assert 0 < self.client.ttl(raw) <= 60, _s(raw)
        # Every job hash is in exactly the structure its state says.
        for raw in self.client.scan_iter(match=f"{k.base}job:*", count=1000):
            job_id = _s(raw)[len(k.base) + len("job:") :]
            found = self.state(job_id)
            where = {
                "queued": job_id in queued_ids,
                "scheduled": job_id in self.zset(k.delayed),
                "running": job_id in self.zset(k.reserved),
                "failed": job_id in self.zset(k.failed),
            }
            if found in where:
                assert where[found], (job_id, found)
                assert sum(where.values()) == 1, (job_id, where)
            else:
                assert not any(where.values()), (job_id, found, where)
