"""Every default of the ``RQUEUE`` setting, written once (as rq's ``defaults.py``).

The settings rows (:mod:`.conf.settings`), the parser (:mod:`.parse`), the checks
(:mod:`.validation`) and the generated settings table all take their defaults from here;
so does the stored job format: :data:`django_rqueue.engine.fields.RECORD_DEFAULTS` leaves a
job option out of the record while it holds :data:`TIMEOUT`, :data:`MAX_ATTEMPTS` or
:data:`RESULT_TTL`, hence those three never change. It imports nothing of the package.
"""

from __future__ import annotations

# --------------------------------------------------------------- top-level keys --

#: ``REDIS_URL`` used when neither ``REDIS_URL`` nor ``CACHE_ALIAS`` is set.
REDIS_URL = "redis://localhost:6379/0"
#: ``KEY_PREFIX``: the first part of every Redis key.
KEY_PREFIX = "rqueue"
#: ``DEFAULT_QUEUE``: the queue of jobs that name none (always declared).
DEFAULT_QUEUE = "default"
#: ``LEASE``, in seconds.
LEASE = 30
#: ``TIMEOUT_GRACE``: seconds between the soft and the hard timeout.
TIMEOUT_GRACE = 5
#: ``EAGER`` and ``EAGER_PROPAGATE``.
EAGER = False
EAGER_PROPAGATE = False
#: ``ASYNC_CONCURRENCY``: async jobs a worker child runs at once.
ASYNC_CONCURRENCY = 1
#: ``MAX_PAYLOAD_BYTES``: 1 MiB of JSON arguments per job. Redis can hold far more (a string
#: up to 512 MB), but it writes and reads a value in one go on its single thread, so big
#: values delay every other client ("big keys" in Redis's latency guidance), and each
#: attempt moves the payload over the network again. Hosted queues cap a message in the
#: same range (Amazon SQS 256 KiB, Google Cloud Tasks 1 MB); larger data belongs in
#: storage, with its key as the argument. ``None`` lifts the limit.
MAX_PAYLOAD_BYTES = 1_048_576
#: Longest JSON document (in characters; bytes for ASCII JSON) a reader decodes: 64 MiB, 64
#: times :data:`MAX_PAYLOAD_BYTES`, and the ceiling of that setting (``rqueue.E135``).
#: Decoding builds Python objects of up to about 20 times the text's size (``[[],[],...]``),
#: so an unbounded value planted in Redis (up to 512 MB) could exhaust a reader's memory.
MAX_JSON_BYTES = 64 * 1024 * 1024
#: ``TASK_MODULES``: no module outside the installed apps.
TASK_MODULES: tuple[str, ...] = ()
#: ``MIDDLEWARE``: no job middleware.
MIDDLEWARE: tuple[str, ...] = ()
#: ``MIN_REPLICAS_ACK``: 0, ``.delay()`` does not wait for replicas.
MIN_REPLICAS_ACK = 0
#: ``MIN_REPLICAS_TIMEOUT``, in seconds.
MIN_REPLICAS_TIMEOUT = 1.0
#: Longest ``MIN_REPLICAS_TIMEOUT``, in seconds: well under the 10 s socket timeout
#: (:data:`django_rqueue.engine.connection.SOCKET_TIMEOUT`) of the ``WAIT`` that uses it.
MAX_REPLICAS_TIMEOUT = 5.0
#: ``REDIS_CLUSTER``: a single server (or a Sentinel-watched master).
REDIS_CLUSTER = False
#: ``WORKFLOW_DEPENDENCY_TIMEOUT``: seconds a job waits for its inputs at most, 7 days.
WORKFLOW_DEPENDENCY_TIMEOUT: float | None = 7 * 86_400
#: ``WORKFLOW_FORCE_OUTBOX``: off; every edge that can be inline is.
WORKFLOW_FORCE_OUTBOX = False
#: ``WEBHOOKS["MAX_RESPONSE_BYTES"]``: bytes of a reply's body a delivery keeps (64 KiB),
#: enough for an error message or a small JSON answer for ``retry_if``.
WEBHOOK_MAX_RESPONSE_BYTES = 65_536

# ------------------------------------------- job options (DEFAULTS, QUEUES[name]) --

#: ``timeout``: hard limit of one attempt, in seconds.
TIMEOUT = 300
#: ``max_attempts``: attempts of a job, the first one included.
MAX_ATTEMPTS = 3
#: ``backoff``: the name of the delay before a retry (:data:`django_rqueue.backoff.NAMED`).
BACKOFF = "exponential"
#: ``result_ttl``: seconds a finished job's record (and result) is kept.
RESULT_TTL = 86_400
#: ``failed_ttl``: seconds a failed job stays in the failed store, 90 days.
FAILED_TTL = 90 * 86_400
#: ``failed_max``: failed jobs the store keeps at most.
FAILED_MAX = 100_000
#: ``rate_limit``: none, the queue hands out jobs as fast as workers take them.
RATE_LIMIT: str | None = None
