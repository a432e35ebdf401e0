"""The field names of the hashes django-rqueue keeps in Redis: job records, workflow records,
periodic entries, duration histograms and a queue's counters.

The keys those hashes live under are built in :mod:`~.keys`; the Lua scripts use the same literals.
"""

from __future__ import annotations

from ..conf import defaults


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
    #: The latest progress a running attempt reported (``JobContext.set_progress``): JSON
    #: ``{"current": number, "total": number|null, "message": str}`` (``progress.lua``).
    PROGRESS = "progress"
    #: Redis time (ms) :attr:`PROGRESS` was written.
    PROGRESS_AT = "progress_at"
    #: The job's metadata (``JobContext.save_metadata``): a JSON object, encrypted like
    #: the result under ``RQUEUE["ENCRYPTION_KEYS"]`` (``save_metadata.lua``).
    METADATA = "metadata"
    #: The job's headers (``RQUEUE["MIDDLEWARE"]`` adds them at enqueue, for trace context):
    #: a JSON object of text to text (:mod:`django_rqueue.headers`), never passed to the
    #: function; only jobs that have some carry it.
    HEADERS = "hd"

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
