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
job: a job with dependents carries :attr:`JobFields.DEPENDENTS`, and its terminal script
derives :data:`WAITING`, :data:`OUTBOX`, the ``wake`` list, :data:`NEXT` (``next:<job id>``),
:data:`WORKFLOW` (``wf:<workflow id>``) and the same-queue dependents' :data:`JOB` keys from
the base; a dependent's own queue is that of its id (:func:`queue_of`).
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass

from ..conf import defaults

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


class JobFields:
    """Field names of the job hash ``<prefix>:{<queue>}:job:<id>`` (Lua uses the same literals).

    The fields every queued job carries have names of one to three letters:
    the long names (``enqueued_at``, ``max_attempts``, ``timeout_ms``,
    ``result_ttl``, ...) took ~65 of a small job's ~220-byte listpack and kept
    it in jemalloc's 224-byte size class instead of the 160-byte one: ~390 ->
    ~325 bytes of Redis memory per queued bench job (``bench/README.md``).
    BullMQ abbreviates its job hash fields the same way (``atm``, ``ats``,
    ``pb``, ``stc``). Fields written later in a job's life keep full names:
    ``prio``, ``group``, ``attempts``, ``token``, ``worker``, ``started_at``,
    ``finished_at``, ``result``, ``error``, ``nerr``, ``err:<n>``, ``cancel_reason``.
    ``tests/engine/test_keys.py`` checks that the scripts use no other spelling.
    """

    #: ``waiting|scheduled|queued|running|succeeded|failed|cancelled``.
    STATE = "s"
    #: Redis time (ms since the epoch, UTC) the job was enqueued.
    ENQUEUED_AT = "at"
    #: Run-at (ms since the epoch, UTC); left out while it equals ``at``.
    RUN_AT = "due"
    #: The job function's registered name.
    NAME = "n"
    #: JSON arguments; 65..1071 bytes are stored in 63-byte parts ``p``, ``p:2``, ...
    PAYLOAD = "p"
    #: Attempts allowed in all.
    MAX_ATTEMPTS = "max"
    #: Hard time limit of one attempt, in milliseconds.
    TIMEOUT_MS = "tmo"
    #: Seconds the finished record is kept.
    RESULT_TTL = "ttl"
    #: The unique key the job holds (absent: none).
    UNIQUE_KEY = "uk"
    #: Expiry: Redis time (ms since the epoch, UTC) from which the job is never started
    #: (absent: never). A reserve or a promote that finds it due ends the job as
    #: ``cancelled`` with :attr:`CANCEL_REASON` ``"expired"`` (``include/expire_if_due.lua``).
    EXPIRES = "exp"
    #: Not stored: in the field list of an enqueue script, an expiry relative to the
    #: enqueue (ms); ``include/create_job.lua`` stores :attr:`EXPIRES` = enqueue time +
    #: this, so that ``expires=<seconds>`` counts on the Redis clock.
    EXPIRES_IN = "exp_in"

    # Written later in a job's life (or only when not at their default), full names.
    #: Priority, -100..100 (absent: 0).
    PRIORITY = "prio"
    #: The group name (absent: the default group).
    GROUP = "group"
    #: Attempts reserved so far (absent: 0).
    ATTEMPTS = "attempts"
    #: Fencing token of the latest reservation (absent: 0).
    TOKEN = "token"  # noqa: S105 - a hash field name, not a secret
    #: Id of the worker that holds the running job (kept after a success: the one that ran it).
    WORKER = "worker"
    #: Redis time (ms) the latest attempt started.
    STARTED_AT = "started_at"
    #: Redis time (ms) the job succeeded, failed for good or was cancelled.
    FINISHED_AT = "finished_at"
    #: The JSON result of a success.
    RESULT = "result"
    #: The latest failed attempt's error record (JSON); cleared by a success.
    ERROR = "error"
    #: Why a ``cancelled`` job was cancelled when it was not by ``cancel()``: ``"expired"``
    #: (its :attr:`EXPIRES` came before it started), ``"dependency_failed"`` (an input
    #: failed, was cancelled or expired, under the ``"cancel"`` policy),
    #: ``"dependency_timeout"`` (its inputs had not all ended by its dependency deadline),
    #: ``"workflow_cancelled"`` (``Workflow.cancel()``). Absent otherwise.
    CANCEL_REASON = "cancel_reason"
    #: How many error records ``err:1`` .. ``err:<n>`` the history holds.
    ERROR_COUNT = "nerr"
    #: Set (``"1"``) while the running job holds one of its group's ``group_concurrency``
    #: slots, counted in :attr:`QueueKeys.grouprun`: the transition that ends the run
    #: (ack, fail, reclaim, release) gives back exactly the slots so marked, so a cap
    #: added, changed or removed between deploys never leaves a count behind. Absent:
    #: not counted (reserved while the queue had no cap). Short like the enqueue-time names.
    GROUP_SLOT = "gc"
    #: The ``run_after`` a ``django.tasks`` task was enqueued with (ISO 8601), kept
    #: as given (``due`` moves with retries); only deferred tasks carry it.
    TASK_RUN_AFTER = "ra"
    #: Redis time (ms) of the first ``Job.cancel()`` of the job while it ran
    #: (``cancel.lua``): its worker's master stops it and ends it ``cancelled``
    #: (``cancel_running.lua``). Absent: no cancel was asked while it ran.
    CANCEL_REQUESTED = "cx"
    #: Set (``"1"``) by ``Job.wait`` before it reads the state: the terminal transition
    #: then wakes the waiters through :meth:`QueueKeys.done` (absent: nobody ever waited,
    #: and the transition pushes nothing). Short like the enqueue-time names; only awaited
    #: jobs carry it.
    AWAITED = "w"
    #: The arguments hidden from people (``@job(sensitive=...)``): JSON ``{"k": [names],
    #: "a": [positions]}`` (:meth:`django_rqueue.sensitive.Sensitive.field`), written at
    #: enqueue; only jobs that declare some carry it.
    SENSITIVE = "sens"

    # Only on the jobs of a workflow or with ``depends_on`` (a plain job carries none of
    # them). An *input* of a job is a job whose outcome it waits for; a *dependent* of a
    # job waits for its outcome. Short like the enqueue-time names.
    #: The id of the workflow the job belongs to (its nodes, its finisher, its callbacks).
    WORKFLOW = "wf"
    #: The job's outgoing edges, one entry per dependent, separated by one space (the
    #: entry format: :mod:`django_rqueue.dependencies`); the entry ``+`` means "also
    #: deliver to the dependents listed in :meth:`QueueKeys.next`", and a workflow's
    #: finisher has the single entry ``w``. Absent on a job nobody depends on: that
    #: absence is how every terminal script knows it has nothing to deliver.
    DEPENDENTS = "nx"
    #: Number of inputs, indexed ``1`` .. ``dn`` (the gate, input ``0``, not counted).
    INPUT_COUNT = "dn"
    #: Inputs whose outcome has not arrived yet (the gate included while it is closed);
    #: the job leaves ``waiting`` in the script that takes it to 0.
    INPUTS_MISSING = "dw"
    #: Inputs that arrived failed (absent: 0); on a finisher, the workflow's failed nodes.
    INPUTS_FAILED = "df"
    #: Inputs that arrived cancelled (absent: 0); on a finisher, the workflow's cancelled nodes.
    INPUTS_CANCELLED = "dc"
    #: The inputs' job ids in index order, separated by one space (absent on a finisher).
    INPUT_IDS = "di"
    #: ``"r"``: run once every input has ended, a failed one passed as a ``DependencyFailed``
    #: (``on_dependency_failure="run"``). Absent: ``"cancel"``, end ``cancelled`` with
    #: :attr:`CANCEL_REASON` ``"dependency_failed"`` when an input did not succeed.
    ON_DEPENDENCY_FAILURE = "dp"
    #: What is prepended to the job's arguments when it runs: ``"1"`` input 1's result,
    #: ``"L"`` the list of inputs ``1`` .. ``dn``, else a JSON tree of input indices
    #: (``[[1,2],3]``). Absent: nothing (``.si()``, ``pass_results=False``).
    PASS_SHAPE = "dr"  # noqa: S105 - a hash field name, not a secret
    #: Milliseconds between the job's release from ``waiting`` and its run
    #: (``using(delay=...)`` on a job that waits). Absent: none.
    RELEASE_DELAY = "rd"
    #: Present while the job's gate (input ``0``) is closed, during a creation in several
    #: steps: the dependency deadline (ms, Redis clock, or ``inf``) to put in
    #: :attr:`QueueKeys.waiting` when it opens.
    GATE = "gt"
    #: Set (``"1"``) with :attr:`CANCEL_REQUESTED` when ``Workflow.cancel()`` asked a
    #: running job to stop: it then ends with :attr:`CANCEL_REASON` ``"workflow_cancelled"``.
    CANCEL_BY_WORKFLOW = "cxw"

    @staticmethod
    def input_part(k: int) -> str:
        """Name of the field holding input ``k``'s arrival (``k >= 1``; ``0`` is the gate):
        present once it arrived, its value the outcome
        (:func:`django_rqueue.dependencies.decode`)."""
        return f"i:{k}"

    @staticmethod
    def payload_part(n: int) -> str:
        """Name of the payload's ``n``-th part (``n >= 2``; the first is :attr:`PAYLOAD`)."""
        return f"{JobFields.PAYLOAD}:{n}"

    @staticmethod
    def error_part(n: int) -> str:
        """Name of the ``n``-th failed attempt's error record (``n >= 1``)."""
        return f"err:{n}"

    @staticmethod
    def error_time_part(n: int) -> str:
        """Name of the Redis time (ms) the ``n``-th failed attempt's error was recorded
        (``n >= 1``; absent from records written before it was kept)."""
        return f"err_at:{n}"


#: Job-hash fields an enqueue leaves out while they hold these values (the built-in
#: defaults of ``max_attempts``, ``timeout`` in ms and ``result_ttl`` in s), and that
#: readers use when a field is absent: a job with the default options stores only
#: ``s``, ``at``, ``n`` and ``p`` (about 32 bytes less per queued bench job: its
#: listpack drops from jemalloc's 160-byte size class to the 128-byte one).
#: Lua mirrors them in ``include/stored_default.lua``. They are the settings' own defaults
#: (:mod:`django_rqueue.conf.defaults`), so they never change: a record without the field
#: would change meaning.
RECORD_DEFAULTS: dict[str, int] = {
    JobFields.MAX_ATTEMPTS: defaults.MAX_ATTEMPTS,
    JobFields.TIMEOUT_MS: defaults.TIMEOUT * 1000,
    JobFields.RESULT_TTL: defaults.RESULT_TTL,
}


class WorkflowFields:
    """Field names of a workflow's record ``<prefix>:{<queue>}:wf:<workflow id>``, on its home
    queue (the queue holding most of its nodes).

    The record's state :attr:`STATE` is one of ``creating`` (written in several steps, not
    committed yet), ``running``, ``cancelling`` (``Workflow.cancel()`` asked, nodes still
    ending), ``reopening`` (``retry_failed()`` re-arming its nodes), ``succeeded``,
    ``failed``, ``cancelled``; ``Workflow.state`` shows the first four as ``running``.
    """

    #: The record's state (see above).
    STATE = "st"
    #: Redis time (ms) the workflow was created.
    CREATED_AT = "t0"
    #: Redis time (ms) it finished (absent while it runs).
    FINISHED_AT = "t1"
    #: Number of declared nodes (the finisher and the callbacks not counted).
    NODE_COUNT = "n"
    #: What the admin calls it: the job name of its last sink.
    NAME = "name"
    #: Compact JSON of its shape: ``nodes`` (``[[id, name], ...]`` in declared order),
    #: ``edges`` (``[[from, to], ...]`` by node index), the exits and the result's shape,
    #: ``locs`` (the locations its nodes are written in).
    SPEC = "spec"
    #: JSON of the ``on_error`` and ``on_complete`` signatures (absent: none).
    CALLBACKS = "cb"
    #: The dependency timeout of its nodes, in seconds (absent: none).
    DEPENDENCY_TIMEOUT = "dto"
    #: The finish generation, from 0; ``retry_failed()`` adds 1.
    GENERATION = "gen"
    #: The generation whose ``workflow_finished`` signal was sent (absent: none yet).
    SIGNALLED = "sig"
    #: The workflow's result (JSON, or encrypted as a job's result), once it finished.
    RESULT = "res"
    #: The stored re-arm plan while :attr:`STATE` is ``reopening`` (JSON).
    PLAN = "plan"
    #: ``"1"`` when the finisher job ended other than by running (cancelled, deleted,
    #: failed for good): the record was then ended ``failed`` without a result.
    LOST = "lost"


class EntryFields:
    """Field names of a periodic entry's hash ``<prefix>:{<queue>}:schedule:<entry>``."""

    #: What defines the entry's ticks (:attr:`django_rqueue.periodic.entries.ScheduleEntry.spec`).
    SPEC = "spec"
    #: The tick (ms since the epoch, UTC) of the latest run; "run now" records its Redis time.
    LAST = "last"
    #: The id of the job the latest run enqueued (a unique key's holder when it was a duplicate).
    JOB = "job"
    #: ``"1"`` while paused (absent: running).
    PAUSED = "paused"


class DurationFields:
    """Field names of a queue's duration histograms ``<prefix>:{<queue>}:durations``.

    One histogram per job name of the attempts that ended by an ack or a
    failure report (``include/observe_duration.lua``; duration = the end's
    Redis time minus the job's ``started_at``, in ms): ``<bound>:<name>``
    counts the attempts of job ``<name>`` that lasted more than the previous
    bound and at most ``<bound>`` ms (``inf:<name>``: longer than the last
    bound), ``sum:<name>`` holds the ms they lasted in all. Each attempt adds
    to the one bucket it falls in; readers cumulate them (Prometheus buckets
    count every observation ``<=`` their bound) and take their sum as the
    count. The part before the first ``:`` never holds one, so a name may
    hold any character (``django.tasks`` jobs are named ``task:<path>``).

    The hash holds at most ``len(BUCKETS_MS) + 2`` fields per job name: names
    are those of the jobs enqueued on the queue, a finite set (the registered
    ``@job`` and task names); deleting the key resets the histograms.
    """

    #: Upper bounds of the buckets, in ms: the Prometheus client libraries' default
    #: buckets (5 ms .. 10 s) extended to long jobs (30 s, 1 min, 5 min, 10 min, 30 min,
    #: 1 h); longer attempts fall in ``inf``. The Lua side lists the same bounds.
    BUCKETS_MS: tuple[int, ...] = (
        *(5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10_000),
        *(30_000, 60_000, 300_000, 600_000, 1_800_000, 3_600_000),
    )
    #: The bucket of attempts longer than the last bound.
    INF = "inf"
    #: The prefix of the fields that sum the durations (ms).
    SUM = "sum"
    SEPARATOR = ":"

    @staticmethod
    def bucket(bound_ms: int | None, name: str) -> str:
        """The field of job ``name``'s bucket up to ``bound_ms`` (``None``: :attr:`INF`)."""
        label = DurationFields.INF if bound_ms is None else str(bound_ms)
        return f"{label}{DurationFields.SEPARATOR}{name}"

    @staticmethod
    def total(name: str) -> str:
        """The field summing job ``name``'s durations, in ms."""
        return f"{DurationFields.SUM}{DurationFields.SEPARATOR}{name}"

    @staticmethod
    def parse(field: str) -> tuple[str, str]:
        """``(kind, name)`` of a field: kind a bound in ms (digits), :attr:`INF` or :attr:`SUM`.

        ``("", field)`` for a field without the separator.
        """
        kind, sep, name = field.partition(DurationFields.SEPARATOR)
        return (kind, name) if sep else ("", field)


class StatsFields:
    """Field names of a queue's counters ``<prefix>:{<queue>}:stats`` (``include/add_count.lua``):
    :attr:`QUEUED` goes up and down, the others count since the queue was created."""

    #: Jobs queued now.
    QUEUED = "queued"
    #: Jobs created, by any enqueue path.
    ENQUEUED = "enqueued"
    SUCCEEDED = "succeeded"
    #: Final failures (the job went to the failed store).
    FAILED = "failed"
    #: Failed attempts scheduled again.
    RETRIED = "retried"
    #: Expired leases taken back.
    RECLAIMED = "reclaimed"
    #: Failed jobs deleted by the failed store's retention.
    TRIMMED = "trimmed"
    #: Jobs cancelled by their expiry before they started.
    EXPIRED = "expired"
    #: Running jobs stopped by their cancel (``cancel_running.lua``).
    CANCELLED = "cancelled"
    #: Waiting jobs released (queued or scheduled) once their inputs had all ended.
    RELEASED = "released"
    #: Waiting jobs cancelled with ``cancel_reason`` ``"dependency_failed"``.
    DEPENDENCY_FAILED = "depcancelled"
    #: Waiting jobs cancelled with ``cancel_reason`` ``"dependency_timeout"``.
    DEPENDENCY_TIMEOUT = "deptimeout"
    # On a workflow's home queue, one count per workflow (never per node); the workflows
    # running now are WORKFLOWS_STARTED minus the three finished counts.
    #: Workflows started (a ``retry_failed()`` restarts one, and counts again).
    WORKFLOWS_STARTED = "wfstarted"
    WORKFLOWS_SUCCEEDED = "wfsucceeded"
    WORKFLOWS_FAILED = "wffailed"
    WORKFLOWS_CANCELLED = "wfcancelled"

    #: The counters of workflows and dependencies (a queue without any keeps none of them).
    WORKFLOW_COUNTERS = (
        *(RELEASED, DEPENDENCY_FAILED, DEPENDENCY_TIMEOUT),
        *(WORKFLOWS_STARTED, WORKFLOWS_SUCCEEDED, WORKFLOWS_FAILED, WORKFLOWS_CANCELLED),
    )
    #: Every counter, in the order above.
    ALL = (
        *(QUEUED, ENQUEUED, SUCCEEDED, FAILED, RETRIED, RECLAIMED, TRIMMED, EXPIRED, CANCELLED),
        *WORKFLOW_COUNTERS,
    )


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
        """The state hash of the periodic entry ``entry`` (its fields: :class:`EntryFields`)."""
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
        """Hash: attempt durations per job name (fields: :class:`DurationFields`)."""
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
        (fields: :class:`WorkflowFields`)."""
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
