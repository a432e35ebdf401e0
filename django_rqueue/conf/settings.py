"""One declarative row per key of ``RQUEUE``: its type, default, check, doc and check ids.

:data:`SETTINGS` holds the top-level keys, :data:`OPTIONS` the job options of ``DEFAULTS``
and of every ``QUEUES[name]``, :data:`QUEUE_OPTIONS` the options of a queue alone. The
checks (:mod:`.validation`), the parser (:mod:`.parse`) and the settings reference page
(:mod:`.table`) all read these rows, so a new setting is one new row (plus, when it
lands in :class:`~.model.Config`, one line of the parser).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import defaults, rules
from .rules import Rule, ValueCheck, is_bool, is_int, is_mapping, is_number


@dataclass(frozen=True)
class Setting:
    """One key of ``RQUEUE`` (or of a queue's options)."""

    #: The key as written in the setting (``"LEASE"``, ``"timeout"``).
    key: str
    #: The Python type of the value, as the table shows it (``"float"``, ``"list[str]"``).
    type: str
    #: The value used when the key is absent (``None``: unset).
    default: Any
    #: One paragraph of Markdown: what the value means, its unit and its range.
    doc: str
    #: The system check ids a bad value (alone or with other keys) raises.
    checks: tuple[str, ...] = ()
    #: The check of the value alone, run when the key is given; ``None``: the checks of
    #: this key all look at other keys too (:mod:`.validation`).
    check: ValueCheck | None = None
    #: The default as the table shows it, when the value itself would not say it.
    shown_default: str | None = None


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


# ------------------------------------------------------------------------ options --

#: The job options of ``DEFAULTS`` and ``QUEUES[name]`` (and of ``@job``), in check order.
OPTIONS: tuple[Setting, ...] = (
    Setting(
        "timeout",
        "float",
        defaults.TIMEOUT,
        "hard limit of one attempt, in seconds",
        ("rqueue.E005",),
        Rule(_positive_number, "{where} must be a positive number of seconds.", "rqueue.E005"),
    ),
    Setting(
        "max_attempts",
        "int",
        defaults.MAX_ATTEMPTS,
        "attempts of a job, the first one included (an integer ≥ 1)",
        ("rqueue.E005",),
        Rule(lambda v: is_int(v, 1), "{where} must be an integer >= 1.", "rqueue.E005"),
    ),
    Setting(
        "result_ttl",
        "int",
        defaults.RESULT_TTL,
        "seconds a finished job's record (and result) is kept",
        ("rqueue.E005",),
        Rule(lambda v: is_int(v, 0), "{where} must be an integer >= 0 (seconds).", "rqueue.E005"),
    ),
    Setting(
        "backoff",
        "str | callable",
        defaults.BACKOFF,
        f"delay before a retry: one of {', '.join(f'`{n}`' for n in sorted(rules.BACKOFF_NAMES))}"
        ", or a callable `(attempt, exception) -> seconds | None`",
        ("rqueue.E006",),
        Rule(
            lambda v: callable(v) or v in rules.BACKOFF_NAMES,
            f"{{where}} must be one of {', '.join(sorted(rules.BACKOFF_NAMES))} "
            "or a callable (attempt, exception) -> seconds | None.",
            "rqueue.E006",
        ),
    ),
    Setting(
        "rate_limit",
        "str | None",
        defaults.RATE_LIMIT,
        'how fast the queue hands out jobs to all workers together: `"100/s"`, `"6000/m"`, '
        '`"1000/h"` ([Rate limits](/howto/rate-limits.md))',
        ("rqueue.E030",),
        rules.rate_limit,
        shown_default="`None` (unlimited)",
    ),
    *(
        Setting(
            key,
            "int | None",
            default,
            f"{what}; `None`: no limit ([Retention of failed jobs]"
            "(/howto/failed-jobs.md#keep-failures-as-long-as-you-need))",
            ("rqueue.E040",),
            Rule(
                lambda v: v is None or is_int(v, 1),
                "{where} must be an integer >= 1 or None (no limit), got {value!r}.",
                "rqueue.E040",
                hint="failed_ttl is in seconds (default 90 days), failed_max a number of jobs "
                "(default 100000).",
            ),
        )
        for key, default, what in (
            ("failed_ttl", defaults.FAILED_TTL, "seconds a failed job stays in the failed store"),
            ("failed_max", defaults.FAILED_MAX, "failed jobs the store keeps at most, oldest out"),
        )
    ),
)

#: The options of ``QUEUES[name]`` alone (not of ``DEFAULTS``), in check order.
QUEUE_OPTIONS: tuple[Setting, ...] = (
    Setting(
        "REDIS_URL",
        "str",
        None,
        "the queue's own Redis server "
        "([Several Redis servers](/howto/deploy-redis.md#several-redis-servers))",
        ("rqueue.E007", "rqueue.E071", "rqueue.E083"),
        rules.redis_url,
        shown_default="the global one",
    ),
    Setting(
        "group_concurrency",
        "int | None",
        None,
        "at most this many jobs of one group of the queue run at once, across all workers; an "
        "integer ≥ 1; jobs without a group are one group "
        "([Per-group concurrency](/howto/fairness.md#cap-each-tenant-group-concurrency))",
        ("rqueue.E060",),
        Rule(
            lambda v: v is None or is_int(v, 1),
            "{where} must be an integer >= 1 or None, got {value!r}.",
            "rqueue.E060",
            hint="At most that many jobs of one group run at once across all workers; "
            "None (or leaving it out) means no cap.",
        ),
        shown_default="`None` (no cap)",
    ),
)

#: The built-in job options, used when neither ``DEFAULTS`` nor a queue sets them.
BUILTIN_DEFAULTS: Mapping[str, Any] = {row.key: row.default for row in OPTIONS}

# ----------------------------------------------------------------- top-level keys --

#: The keys of ``RQUEUE``, in the order they are checked (and listed in the reference).
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "REDIS_URL",
        "str",
        defaults.REDIS_URL,
        "`redis://`, `rediss://` or `unix://` URL of the Redis server (the default, with a "
        "warning, when neither this nor `CACHE_ALIAS` is set)",
        ("rqueue.E007", "rqueue.W001"),
    ),
    Setting(
        "CACHE_ALIAS",
        "str",
        None,
        "reuse the connection of this django-redis cache in `CACHES` (not together with "
        "`REDIS_URL`)",
        ("rqueue.E007",),
    ),
    Setting(
        "KEY_PREFIX",
        "str",
        defaults.KEY_PREFIX,
        "prefix of every key; 1–64 of `[A-Za-z0-9_.:-]`",
        ("rqueue.E003",),
        Rule(
            lambda v: isinstance(v, str) and rules.KEY_PREFIX_RE.match(v) is not None,
            "{where} must be 1-64 characters of [A-Za-z0-9_.:-].",
            "rqueue.E003",
        ),
    ),
    Setting(
        "QUEUES",
        "dict",
        {},
        "queue name (1–64 of letters, digits, `_ . -`) → options: the job options below, and "
        "for the queue alone `REDIS_URL` and `group_concurrency`; `default` always exists; "
        "using an undeclared queue raises `ValueError`",
        ("rqueue.E002", "rqueue.E003", "rqueue.E004"),
        Rule(is_mapping, "{where} must be a dict of queue name -> options.", "rqueue.E003"),
        shown_default='`{"default": {}}`',
    ),
    Setting(
        "DEFAULT_QUEUE",
        "str",
        defaults.DEFAULT_QUEUE,
        "queue of jobs that name none; must be declared if `QUEUES` is given",
        ("rqueue.E004",),
        Rule(rules.is_queue_name, "{where} {value!r} is invalid.", "rqueue.E004"),
    ),
    Setting(
        "DEFAULTS",
        "dict",
        BUILTIN_DEFAULTS,
        "job options of every queue (below); a queue's own options override them",
        ("rqueue.E002", "rqueue.E003"),
        Rule(is_mapping, "{where} must be a dict.", "rqueue.E003"),
        shown_default="the options' own (below)",
    ),
    Setting(
        "LEASE",
        "float",
        defaults.LEASE,
        "lease length in seconds, renewed every third of it while a job runs",
        ("rqueue.E005",),
        Rule(_positive_number, "{where} must be a positive number of seconds.", "rqueue.E005"),
    ),
    Setting(
        "TIMEOUT_GRACE",
        "float",
        defaults.TIMEOUT_GRACE,
        "seconds between a job's soft timeout (`JobTimeout` raised in the job) and its hard "
        "timeout (the master kills the child); `rqueue_work --timeout-grace` overrides it",
        ("rqueue.E005",),
        Rule(
            lambda v: is_number(v) and v >= 0,
            "{where} must be a number of seconds >= 0.",
            "rqueue.E005",
        ),
    ),
    Setting(
        "MAX_PAYLOAD_BYTES",
        "int | None",
        defaults.MAX_PAYLOAD_BYTES,
        "the largest JSON of a job's arguments, in bytes: a larger call raises `ValueError` at "
        "`.delay()` (and every other enqueue) and writes nothing; `None`: no limit of its own, "
        f"but never more than the {defaults.MAX_JSON_BYTES // 2**20} MiB of JSON a worker "
        "decodes. Redis writes and reads a value in one go on its single thread, so big values "
        "delay every other client; hosted queues cap a message in the same range (Amazon SQS "
        "256 KiB, Google Cloud Tasks 1 MB): store large data elsewhere and pass its key",
        ("rqueue.E090", "rqueue.E135"),
        rules.max_payload_bytes,
    ),
    Setting(
        "TASK_MODULES",
        "list[str]",
        defaults.TASK_MODULES,
        "modules (with their submodules) outside `INSTALLED_APPS` whose `django.tasks` tasks "
        "workers may import; a task job naming any other module fails with `UnknownJob` "
        "without importing it, so a job name written to Redis cannot make a worker run a "
        "module's top-level code",
        ("rqueue.E091",),
        Rule(
            lambda v: (
                isinstance(v, list | tuple)
                and all(isinstance(m, str) and rules.MODULE_PATH_RE.match(m) for m in v)
            ),
            "{where} must be a list of module paths, got {value!r}.",
            "rqueue.E091",
            hint="Modules outside INSTALLED_APPS whose django.tasks tasks workers may "
            "import, e.g. ['myproject.tasks'].",
        ),
    ),
    Setting(
        "ASYNC_CONCURRENCY",
        "int",
        defaults.ASYNC_CONCURRENCY,
        "`async def` jobs a worker child runs at once on its event loop (an integer ≥ 1); "
        "`rqueue_work --async-concurrency` overrides it ([Async jobs](/howto/jobs.md#async-jobs))",
        ("rqueue.E005",),
        Rule(
            lambda v: is_int(v, 1),
            "{where} must be an integer >= 1, got {value!r}.",
            "rqueue.E005",
            hint="How many async jobs a worker child runs at once (default 1).",
        ),
    ),
    Setting(
        "EAGER",
        "bool",
        defaults.EAGER,
        "run jobs inline in `.delay()`",
        ("rqueue.E003",),
        Rule(is_bool, "{where} must be True or False.", "rqueue.E003"),
    ),
    Setting(
        "EAGER_PROPAGATE",
        "bool",
        defaults.EAGER_PROPAGATE,
        "in EAGER mode, re-raise a job's final exception to the caller",
        ("rqueue.E003",),
        Rule(is_bool, "{where} must be True or False.", "rqueue.E003"),
    ),
    Setting(
        "SCHEDULE",
        "dict",
        {},
        'periodic jobs: entry name → `{"job": name, "cron": "m h dom mon dow" or "every": '
        'seconds, "args": [...], "kwargs": {...}, "timezone": IANA name (default '
        '`TIME_ZONE`), "queue"/"priority"/"group" (default: the job\'s)}` '
        "([Periodic jobs](/howto/periodic.md))",
        tuple(f"rqueue.E02{n}" for n in range(6)),
    ),
    Setting(
        "SENTINELS",
        "list[tuple[str, int]]",
        None,
        "`[(host, port), ...]` of the Redis Sentinels watching the master; every `REDIS_URL` "
        "then names the master, `redis://[user:password@]<service name>/<db>` (or "
        "`rediss://`, no port), and clients follow a failover "
        "([Deploying on Sentinel](/howto/deploy-redis.md#redis-sentinel); not with `CACHE_ALIAS`)",
        ("rqueue.E070", "rqueue.E071", "rqueue.E072"),
        rules.sentinels,
    ),
    Setting(
        "SENTINEL_KWARGS",
        "dict",
        None,
        'options of the connections to the sentinels themselves, e.g. `{"password": ...}` '
        "(ignored, with a warning, without `SENTINELS`)",
        ("rqueue.E073", "rqueue.W070"),
        Rule(
            lambda v: v is None or (is_mapping(v) and all(isinstance(k, str) for k in v)),
            "{where} must be a dict of redis.Redis options (such as {{'password': ...}}).",
            "rqueue.E073",
        ),
    ),
    Setting(
        "MIN_REPLICAS_ACK",
        "int",
        defaults.MIN_REPLICAS_ACK,
        "durable enqueue: `.delay()`, `.adelay()`, `.delay_many()` and the `django.tasks` "
        "backend wait (`WAIT`) until this many replicas have the job, else raise "
        "`NotReplicated`; 0 does not wait",
        ("rqueue.E074", "rqueue.E084"),
        Rule(
            lambda v: is_int(v, 0),
            "{where} must be an integer >= 0, got {value!r}.",
            "rqueue.E074",
            hint="How many replicas must have an enqueued job before .delay() returns "
            "(0, the default: do not wait).",
        ),
    ),
    Setting(
        "MIN_REPLICAS_TIMEOUT",
        "float",
        defaults.MIN_REPLICAS_TIMEOUT,
        f"seconds that wait lasts at most, > 0 and ≤ {defaults.MAX_REPLICAS_TIMEOUT:g}",
        ("rqueue.E075",),
        Rule(
            lambda v: is_number(v) and 0 < v <= defaults.MAX_REPLICAS_TIMEOUT,
            "{where} must be a number of seconds > 0 and "
            f"<= {defaults.MAX_REPLICAS_TIMEOUT:g}, got {{value!r}}.",
            "rqueue.E075",
        ),
    ),
    Setting(
        "REDIS_CLUSTER",
        "bool",
        defaults.REDIS_CLUSTER,
        "every `REDIS_URL` (global and per queue) names any node of a Redis Cluster, served by "
        "redis-py's cluster client "
        "([Deploying on Redis Cluster](/howto/deploy-redis.md#redis-cluster);"
        " not with `CACHE_ALIAS`, `SENTINELS` or `MIN_REPLICAS_ACK`, no db other than 0)",
        tuple(f"rqueue.E08{n}" for n in range(5)),
        Rule(is_bool, "{where} must be True or False, got {value!r}.", "rqueue.E080"),
    ),
    Setting(
        "ENCRYPTION_KEYS",
        "list[str | bytes]",
        None,
        "Fernet keys (`Fernet.generate_key()`, `pip install 'django-rqueue[encryption]'`): job "
        "arguments, results and errors are encrypted in Python before they reach Redis (job "
        "name, queue, state, options and times stay plain); the first key encrypts, every key "
        "decrypts, so rotate by putting a new key first and dropping the old one once the "
        "records it encrypted are gone (a failed job's record stays up to `failed_ttl`). "
        "Records written without keys still read; a job no configured key decrypts fails (or "
        "shows in the admin) with an error saying so, nothing crashes (no message shows a key)",
        ("rqueue.E110", "rqueue.E111", "rqueue.E112"),
        rules.encryption_keys,
    ),
    Setting(
        "WORKFLOW_DEPENDENCY_TIMEOUT",
        "float | None",
        defaults.WORKFLOW_DEPENDENCY_TIMEOUT,
        "seconds a job of a workflow (or with `using(depends_on=...)`) waits for its inputs at "
        "most, counted from its creation on the Redis clock; then it ends `cancelled` with "
        "reason `dependency_timeout`, and so do the jobs after it; `None`: no limit. "
        "`using(dependency_timeout=...)` on a job or a workflow overrides it",
        ("rqueue.E005",),
        Rule(
            lambda v: v is None or _positive_number(v),
            "{where} must be a positive number of seconds or None (no limit), got {value!r}.",
            "rqueue.E005",
        ),
        shown_default="`604800` (7 days)",
    ),
    Setting(
        "WORKFLOW_FORCE_OUTBOX",
        "bool",
        defaults.WORKFLOW_FORCE_OUTBOX,
        "a testing aid: every edge of a workflow goes through its queue's outbox, and every "
        "workflow is created in steps (as across Redis Cluster slots), even on one Redis, so "
        "that a test suite run with it on covers the cross-slot path; leave it off in "
        "production (it adds a relay round trip to every dependency)",
        ("rqueue.E003",),
        Rule(is_bool, "{where} must be True or False, got {value!r}.", "rqueue.E003"),
    ),
    Setting(
        "MIDDLEWARE",
        "list[str]",
        defaults.MIDDLEWARE,
        "dotted paths of job middleware classes, in order: each sees every job before it is "
        "written (and may add headers to it) and wraps every attempt; the first is "
        "outermost ([Middleware and headers](/howto/middleware.md))",
        ("rqueue.E140", "rqueue.E141", "rqueue.E142"),
        Rule(
            lambda v: (
                isinstance(v, list | tuple)
                and all(isinstance(m, str) and rules.MODULE_PATH_RE.match(m) for m in v)
            ),
            "{where} must be a list of dotted paths of classes, got {value!r}.",
            "rqueue.E140",
            hint="For example ['myproject.middleware.TenantMiddleware'].",
        ),
    ),
    Setting(
        "WEBHOOKS",
        "dict",
        {},
        "`ALLOWED_HOSTS`: host names, `.domains` and IP networks webhook deliveries may reach "
        "although not public (default none); `MAX_RESPONSE_BYTES` (default "
        f"`{defaults.WEBHOOK_MAX_RESPONSE_BYTES}`): bytes of a reply's body a delivery reads "
        "([Webhooks](/howto/webhooks.md); checked by `django_rqueue.contrib.webhooks`)",
        ("rqueue.E100", "rqueue.E101", "rqueue.E102", "rqueue.W100"),
    ),
)

#: Every row by key: the top-level keys.
BY_KEY: Mapping[str, Setting] = {row.key: row for row in SETTINGS}
TOP_LEVEL_KEYS = frozenset(BY_KEY)
OPTION_KEYS = frozenset(row.key for row in OPTIONS)
QUEUE_KEYS = OPTION_KEYS | {row.key for row in QUEUE_OPTIONS}
#: The check ids of the setting as a whole, with what each means.
GENERAL_CHECKS: Mapping[str, str] = {"rqueue.E001": "not a dict", "rqueue.E002": "an unknown key"}
