"""Every Redis key name django-rqueue uses, built in this one module.

All keys of one queue share the Redis Cluster hash tag ``{<queue>}`` so that
each Lua script touches a single slot::

    <prefix>:{<queue>}:job:<job id>           hash    the job record
    <prefix>:{<queue>}:prios                  zset    priority levels with queued jobs
    <prefix>:{<queue>}:ring:<prio>            list    groups with queued jobs at <prio>, round-robin
    <prefix>:{<queue>}:group:<prio>:<group>   list    that group's queued job ids, FIFO
    <prefix>:{<queue>}:delayed                zset    job id -> run-at (ms, Redis clock)
    <prefix>:{<queue>}:reserved               zset    job id -> lease deadline (ms, Redis clock)
    <prefix>:{<queue>}:failed                 zset    job id -> failed-at (ms)
    <prefix>:{<queue>}:stats                  hash    O(1) counters: queued (jobs queued now);
                                                      since the queue was created: enqueued
                                                      (jobs created, by any enqueue path),
                                                      succeeded, failed (final failures),
                                                      retried (failed attempts retried),
                                                      reclaimed (expired leases taken back),
                                                      trimmed (failed jobs deleted by retention),
                                                      expired (jobs cancelled by their expiry),
                                                      cancelled (running jobs stopped by their
                                                      cancel, ``cancel_running.lua``),
                                                      released (waiting jobs whose inputs all
                                                      ended, queued or scheduled), depcancelled
                                                      (waiting jobs cancelled
                                                      ``dependency_failed``), deptimeout
                                                      (waiting jobs cancelled
                                                      ``dependency_timeout``); on a workflow's home
                                                      queue: wfstarted (workflows started, and
                                                      restarted by ``retry_failed``), wfsucceeded,
                                                      wffailed, wfcancelled (workflows finished so)
    <prefix>:{<queue>}:throughput             hash    succeeded/failed per minute, a 60-slot ring
    <prefix>:{<queue>}:durations              hash    attempt durations per job name, a histogram
                                                      (fields: :class:`DurationFields`)
    <prefix>:{<queue>}:succeeded              zset    latest 1000 kept successes, id -> finish ms
    <prefix>:{<queue>}:unique:<key>           string  id of the pending job holding a unique key
    <prefix>:{<queue>}:reservation:<request>  string  ids a reserve call handed out (a resent
                                                      call returns them; expires with the lease)
    <prefix>:{<queue>}:notify                 list    wake-up tokens for idle workers (BLPOP)
    <prefix>:{<queue>}:wake                   list    wake-up tokens for pollers (BLPOP)
    <prefix>:{<queue>}:paused                 string  present while the queue is paused
                                                      (``rqueue_pause``): Redis time (ms)
                                                      the pause began
    <prefix>:{<queue>}:rate                   string  a rate-limited queue's GCRA state: the
                                                      theoretical arrival time (ms, Redis clock)
                                                      of its next job; expires when that passes
    <prefix>:{<queue>}:done:<job id>          list    wake-up tokens for ``Job.wait`` (BLPOP);
                                                      pushed only for an awaited job, expires
                                                      60 s after its terminal transition
    <prefix>:{<queue>}:schedule               zset    periodic entry -> its next tick (ms, Redis
                                                      clock), for the entries on this queue
    <prefix>:{<queue>}:schedule:<entry>       hash    a periodic entry's state: ``spec`` (what
                                                      defines its ticks), ``last`` (tick ms of
                                                      the latest run), ``job`` (its job id),
                                                      ``paused`` ("1" while paused)
    <prefix>:{<queue>}:grouprun               hash    group -> its running jobs that hold a
                                                      ``group_concurrency`` slot (absent: 0)
    <prefix>:{<queue>}:groupfull              set     groups at their ``group_concurrency``
                                                      cap: their queued jobs are parked
    <prefix>:{<queue>}:parked:<group>         set     priorities at which a group at its cap
                                                      has queued jobs, held out of the rings
                                                      until one of its running jobs ends
    <prefix>:{<queue>}:waiting                zset    waiting job id -> its dependency deadline
                                                      (ms, Redis clock; ``+inf``: none): the jobs
                                                      in state ``waiting``, whose inputs have not
                                                      all ended
    <prefix>:{<queue>}:next:<job id>          list    edge entries of the dependents linked to an
                                                      existing job (``using(depends_on=...)``);
                                                      delivered and deleted by that job's
                                                      terminal transition
    <prefix>:{<queue>}:outbox                 stream  outcomes of this queue's jobs for dependents
                                                      on other queues (fields ``d`` dependent id,
                                                      ``x`` input index, ``v`` arrival value),
                                                      consumer group ``relay`` of the pollers
    <prefix>:{<queue>}:wf:<workflow id>       hash    a workflow's record, on its home queue
                                                      (fields: :class:`WorkflowFields`); expires
                                                      after the home queue's ``result_ttl`` once
                                                      the workflow finished
    <prefix>:{<queue>}:wfs                    zset    workflow id -> created (ms): the workflows
                                                      whose home is this queue
    <prefix>:{<queue>}:wfopen                 zset    workflow id -> the deadline (ms) by which a
                                                      creation in several steps, or a restart by
                                                      ``retry_failed``, is rolled back or forward
    <prefix>:{<queue>}:permission-probe       -       never written: the permission check
                                                      queues every command on it in a
                                                      ``MULTI`` that is never executed
                                                      (:mod:`~.permissions`)

Keys shared by every queue (on the default connection, outside any hash tag; no
script and no ``MULTI`` touches two of them, so in a Redis Cluster each may live
in any slot)::

    <prefix>:workers                          zset    worker id -> last heartbeat (ms)
    <prefix>:worker:<worker id>               hash    a worker's state; expires one lease after
    <prefix>:restart                          string  Redis time (ms) of the last ``rqueue_restart``
    <prefix>:pollers                          zset    poller id -> Redis time (ms) of its latest
                                                      round (every poller: a worker's and
                                                      ``rqueue_poller``; ``rqueue_info --check``)
    <prefix>:permission-probe                 -       never written, as the queues' one

Scripts whose keys depend on what they find (reserve picks a priority, a
group and a job; promote, reclaim and the failed store's retention walk many
jobs) receive the queue's base ``<prefix>:{<queue>}:`` in ``KEYS`` and append the suffixes
:data:`JOB`, :data:`RING`, :data:`GROUP`, :data:`DONE` and :data:`PARKED` below; the scripts
name the same suffixes in their headers, and ``tests/engine/test_keys.py`` checks that both
agree. Every script that reserves or queues a job also reads :data:`PAUSED` under the base
(``include/reserve_batch.lua``, ``include/push_queued_many.lua``), so the many scripts
that queue jobs need no extra ``KEYS`` entry for it; the reserving scripts derive
:data:`RATE` the same way (``include/reserve_batch.lua``, for a queue with a
``rate_limit``). Per-group concurrency
(``include/group_slot_take.lua``, ``include/group_slot_free.lua``) derives
:data:`GROUPRUN`, :data:`GROUPFULL` and :data:`PARKED` the same way, in every script
that reserves, queues or ends a job; the end of a run (ack, fail, reclaim, release)
may put a parked group back in its rings, so it also derives :data:`PRIOS`,
:data:`RING` and :data:`NOTIFY` (``ack.lua`` and ``fail.lua`` do not otherwise need them).
Dependencies (workflows, ``depends_on``) add no ``KEYS`` entry to the scripts that end a
job: a job with dependents carries :attr:`~.fields.JobFields.DEPENDENTS`, and its terminal script
derives :data:`WAITING`, :data:`OUTBOX`, the ``wake`` list, :data:`NEXT` (``next:<job id>``),
:data:`WORKFLOW` (``wf:<workflow id>``) and the same-queue dependents' :data:`JOB` keys from
the base; a dependent's own queue is that of its id (:func:`queue_of`).
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass

# Suffixes appended to a queue's base key ``<prefix>:{<queue>}:`` (Lua mirrors them).
#: The job record, ``job:<job id>``.
JOB = "job:"
#: The groups with queued jobs at a priority, ``ring:<prio>``.
RING = "ring:"
#: A group's queued job ids, ``group:<prio>:<group>``.
GROUP = "group:"
#: Successes and failures per minute.
THROUGHPUT = "throughput"
#: Attempt durations per job name.
DURATIONS = "durations"
#: The latest successes kept.
SUCCEEDED = "succeeded"
#: The wake-up tokens of ``Job.wait``, ``done:<job id>``.
DONE = "done:"
#: A periodic entry's state, ``schedule:<entry>``.
SCHEDULE_ENTRY = "schedule:"
#: Present while the queue is paused.
PAUSED = "paused"
#: A rate-limited queue's GCRA state.
RATE = "rate"
#: The priority levels with queued jobs.
PRIOS = "prios"
#: The wake-up tokens of idle workers.
NOTIFY = "notify"
#: Each group's running jobs that hold a ``group_concurrency`` slot.
GROUPRUN = "grouprun"
#: The groups at their ``group_concurrency`` cap.
GROUPFULL = "groupfull"
#: The priorities at which a group at its cap has parked jobs, ``parked:<group>``.
PARKED = "parked:"
#: The waiting jobs of a queue, scored by their dependency deadline.
WAITING = "waiting"
#: The dependents linked to an existing job, ``next:<job id>``.
NEXT = "next:"
#: The outcomes to deliver to dependents on other queues (a stream).
OUTBOX = "outbox"
#: A workflow's record, ``wf:<workflow id>``.
WORKFLOW = "wf:"
#: The workflows whose home is the queue.
WORKFLOWS = "wfs"
#: The workflows being created in several steps, or restarted, with their deadlines.
OPENING = "wfopen"
#: A key name no command ever runs on (:attr:`QueueKeys.permission_probe`); Lua never uses it.
PERMISSION_PROBE = "permission-probe"


#: Separator between the queue name and the random part of a job id.
ID_SEPARATOR = ":"
#: Random bytes of a job id, and the length of their URL-safe base64 form (no padding).
ID_RANDOM_BYTES, ID_RANDOM_LENGTH = 16, 22


def new_job_id(queue: str) -> str:
    """Return a new job id ``"<queue>:<22 URL-safe base64 characters>"``: 128 random bits.

    ``secrets.token_urlsafe(16)``: as random as a UUID4 (which keeps 122 of
    its 128 bits random), in 22 characters instead of 32 hex digits. The id
    is stored twice per queued job (in its key and in its group list), so the
    shorter form saves ~10 bytes of Redis memory per job (``bench/README.md``).
    The queue is part of the id so that :func:`queue_of` finds a job's queue
    (and so its Redis connection and keys) from the id alone.
    """
    # secrets.token_urlsafe(16), without its two wrapper calls (a .delay() makes one id).
    random = base64.urlsafe_b64encode(os.urandom(ID_RANDOM_BYTES))[:ID_RANDOM_LENGTH]
    return f"{queue}{ID_SEPARATOR}{random.decode()}"


#: What follows a workflow's id in the id of its finisher job (on the same, home queue).
FINISHER_SUFFIX = ".f"


def finisher_id(workflow_id: str) -> str:
    """The id of the finisher job of the workflow ``workflow_id`` (a workflow id has a job
    id's shape, ``"<home queue>:<22 characters>"``; its finisher is on the home queue)."""
    return workflow_id + FINISHER_SUFFIX


#: What follows ``"<queue>:"`` in a job id: :func:`new_job_id`'s 22 URL-safe base64
#: characters, or a caller's ``using(job_id=...)``: 1 to 128 characters that need no
#: quoting in keys, URLs or logs (a queue name has no ``:``, so the first one ends it).
ID_PART_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def queue_of(job_id: str) -> str | None:
    """Return the queue embedded in ``job_id``, or ``None`` if it has no valid shape."""
    queue, sep, rest = job_id.partition(ID_SEPARATOR)
    if not sep or not queue or not ID_PART_RE.match(rest):
        return None
    return queue


@dataclass(frozen=True)
class QueueKeys:
    """Key names of one queue. ``base`` is ``"<prefix>:{<queue>}:"``."""

    base: str

    @classmethod
    def of(cls, key_prefix: str, queue: str) -> QueueKeys:
        return cls(f"{key_prefix}:{{{queue}}}:")

    def job(self, job_id: str) -> str:
        return f"{self.base}{JOB}{job_id}"

    def ring(self, priority: int) -> str:
        return f"{self.base}{RING}{priority}"

    def group(self, priority: int, group: str) -> str:
        return f"{self.base}{GROUP}{priority}:{group}"

    def unique(self, unique_key: str) -> str:
        return f"{self.base}unique:{unique_key}"

    def reservation(self, request_id: str) -> str:
        return f"{self.base}reservation:{request_id}"

    def done(self, job_id: str) -> str:
        """The wake-up list of ``Job.wait`` on ``job_id`` (include/wake_waiters.lua)."""
        return f"{self.base}{DONE}{job_id}"

    def schedule_entry(self, entry: str) -> str:
        """A periodic entry's state hash (fields: :class:`~.fields.EntryFields`)."""
        return f"{self.base}{SCHEDULE_ENTRY}{entry}"

    @property
    def schedule(self) -> str:
        """The zset of this queue's periodic entries, scored by their next tick (ms)."""
        return f"{self.base}schedule"

    @property
    def prios(self) -> str:
        return f"{self.base}{PRIOS}"

    @property
    def grouprun(self) -> str:
        """Hash: group -> its running jobs that hold a ``group_concurrency`` slot."""
        return f"{self.base}{GROUPRUN}"

    @property
    def groupfull(self) -> str:
        """Set: the groups at their ``group_concurrency`` cap (their queued jobs are parked)."""
        return f"{self.base}{GROUPFULL}"

    def parked(self, group: str) -> str:
        """Set: priorities at which ``group``, at its cap, has queued jobs held out of the rings."""
        return f"{self.base}{PARKED}{group}"

    @property
    def delayed(self) -> str:
        return f"{self.base}delayed"

    @property
    def reserved(self) -> str:
        return f"{self.base}reserved"

    @property
    def failed(self) -> str:
        return f"{self.base}failed"

    @property
    def stats(self) -> str:
        return f"{self.base}stats"

    @property
    def throughput(self) -> str:
        return f"{self.base}{THROUGHPUT}"

    @property
    def durations(self) -> str:
        """Hash: attempt durations per job name (fields: :class:`~.fields.DurationFields`)."""
        return f"{self.base}{DURATIONS}"

    @property
    def succeeded(self) -> str:
        return f"{self.base}{SUCCEEDED}"

    @property
    def notify(self) -> str:
        return f"{self.base}{NOTIFY}"

    @property
    def wake(self) -> str:
        return f"{self.base}wake"

    @property
    def paused(self) -> str:
        """Present while the queue is paused; its value is the Redis time (ms) of the pause."""
        return f"{self.base}{PAUSED}"

    @property
    def waiting(self) -> str:
        """Zset: the queue's ``waiting`` jobs -> their dependency deadline (ms, Redis clock)."""
        return f"{self.base}{WAITING}"

    def next(self, job_id: str) -> str:
        """List: the edge entries of the dependents linked to ``job_id`` after it was created."""
        return f"{self.base}{NEXT}{job_id}"

    @property
    def outbox(self) -> str:
        """Stream: outcomes of this queue's jobs for dependents on other queues."""
        return f"{self.base}{OUTBOX}"

    def workflow(self, workflow_id: str) -> str:
        """Hash: the record of the workflow ``workflow_id`` whose home is this queue
        (fields: :class:`~.fields.WorkflowFields`)."""
        return f"{self.base}{WORKFLOW}{workflow_id}"

    @property
    def workflows(self) -> str:
        """Zset: the workflows whose home is this queue -> created (ms)."""
        return f"{self.base}{WORKFLOWS}"

    @property
    def opening(self) -> str:
        """Zset: workflows created in several steps or restarting -> their roll-back or
        roll-forward deadline (ms)."""
        return f"{self.base}{OPENING}"

    @property
    def permission_probe(self) -> str:
        """A key under the queue's hash tag that is never written: the permission check
        (:mod:`~.permissions`) names it in commands it queues and never executes."""
        return f"{self.base}{PERMISSION_PROBE}"

    @property
    def rate(self) -> str:
        """A rate-limited queue's GCRA state: the theoretical arrival time (ms) of its next job."""
        return f"{self.base}{RATE}"


def workers_key(key_prefix: str) -> str:
    """The zset of known workers (id -> last heartbeat in ms)."""
    return f"{key_prefix}:workers"


def worker_key(key_prefix: str, worker_id: str) -> str:
    """The hash a worker publishes about itself (expires one lease after its last heartbeat)."""
    return f"{key_prefix}:worker:{worker_id}"


def pollers_key(key_prefix: str) -> str:
    """The zset of pollers (poller id -> Redis time in ms of its latest round)."""
    return f"{key_prefix}:pollers"


def permission_probe_key(key_prefix: str) -> str:
    """A key among the shared ones that is never written (:attr:`QueueKeys.permission_probe`)."""
    return f"{key_prefix}:{PERMISSION_PROBE}"


def restart_key(key_prefix: str) -> str:
    """Where ``rqueue_restart`` leaves the Redis time (ms) of its request."""
    return f"{key_prefix}:restart"
