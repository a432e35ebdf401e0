"""Prometheus metrics of every declared queue: mount :func:`metrics_view` for a scraper.

Needs ``prometheus_client`` (``pip install "django-rqueue[prometheus]"``);
importing this module without it raises ``ImportError`` naming the extra.

The metrics, their labels and meanings are listed in the documentation's metrics reference,
generated from what :class:`QueueCollector` yields (its ``HELP`` texts are the meanings);
how they are counted is in its explanation of the metrics. In short: the numbers are
counted in Redis by the transition scripts themselves (the queue's ``stats`` and
``durations`` hashes, :mod:`django_rqueue.engine.keys`), so every process reports the same
values; a scrape reads each queue in a bounded number of pipelined round trips
(:func:`~django_rqueue.ops.counts.queue_counts`, then one more for the duration histograms
and the Redis clock) and the worker registry in two, whatever the number of jobs. A Redis
that cannot be reached makes its queues' ``rqueue_redis_up`` 0 and leaves out their other
series, and is not tried again in the same scrape; the view still answers 200.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from ..conf import get_config
from ..engine.connection import as_text, get_client
from ..engine.fields import DurationFields
from ..engine.queue_ref import queue_ref
from ..exceptions import RedisUnavailable
from .counts import QueueCounts, hash_and_time, queue_counts
from .workers import WorkerInfo, list_workers

try:
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import Collector
except ImportError as exc:
    raise ImportError(
        'django_rqueue.metrics needs prometheus_client: pip install "django-rqueue[prometheus]"'
    ) from exc

logger = logging.getLogger("django_rqueue")

#: The job states ``rqueue_jobs`` counts (the ``state`` label), with their ``QueueCounts`` field.
JOB_STATES = ("waiting", "queued", "scheduled", "running", "failed")
#: ``rqueue_jobs_<event>_total``: the ``QueueCounts`` field of each, and its help text.
TOTALS = {
    "enqueued": ("enqueued_total", "Jobs created on the queue, by any enqueue path."),
    "succeeded": ("succeeded_total", "Jobs that succeeded."),
    "failed": ("failed_total", "Jobs moved to the failed store (their final failure)."),
    "retried": ("retried_total", "Failed attempts scheduled again (retries with backoff)."),
    "reclaimed": (
        "reclaimed_total",
        "Expired leases taken back by a poller (the job requeued or failed).",
    ),
    "expired": ("expired", "Jobs cancelled by their expiry before they started."),
    "trimmed": ("trimmed", "Failed jobs deleted by the failed store's retention."),
    "released": (
        "released_total",
        "Waiting jobs released (queued, or scheduled after their delay) once their inputs ended.",
    ),
    "dependency_failed": (
        "dependency_failed_total",
        "Waiting jobs cancelled because an input did not succeed (dependency_failed).",
    ),
    "dependency_timeout": (
        "dependency_timeout_total",
        "Waiting jobs cancelled because their inputs had not all ended by their dependency"
        " deadline (dependency_timeout).",
    ),
}
#: The end states ``rqueue_workflows_finished_total`` counts (the ``state`` label), with their
#: ``QueueCounts`` field.
WORKFLOW_ENDS = {
    "succeeded": "workflows_succeeded_total",
    "failed": "workflows_failed_total",
    "cancelled": "workflows_cancelled_total",
}


@dataclass
class Histogram:
    """The attempt durations of one job on one queue, as stored (one bucket per attempt).

    ``counts[i]`` is the number of attempts that fell in bucket ``i`` alone:
    those of at most ``DurationFields.BUCKETS_MS[i]`` ms and more than the
    previous bound; the last entry those longer than every bound.
    """

    counts: list[int] = field(default_factory=lambda: [0] * (len(DurationFields.BUCKETS_MS) + 1))
    sum_ms: int = 0

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus buckets: ``(le in seconds as Prometheus writes it, attempts <= le)``,
        the last ``("+Inf", every attempt)``."""
        # Written as prometheus_client writes its own buckets' bounds ("0.005", "10.0").
        bounds = [repr(ms / 1000) for ms in DurationFields.BUCKETS_MS] + ["+Inf"]
        found, running = [], 0
        for le, count in zip(bounds, self.counts, strict=True):
            running += count
            found.append((le, float(running)))
        return found


#: The longest count a ``durations`` field is read with (a 64-bit counter has 19 digits);
#: a longer one is corrupt, and ``int()`` refuses more than 4 300 digits.
_MAX_DIGITS = 20


def histograms(raw: Mapping[bytes | str, bytes | str]) -> dict[str, Histogram]:
    """Read a queue's ``durations`` hash: job name -> :class:`Histogram`.

    A bound that is not one of ``BUCKETS_MS`` (written with other bounds) is
    counted in the first bucket at or above it; fields of another shape, and
    corrupt counts (not a whole number, over 20 digits), are left out.
    """
    found: dict[str, Histogram] = {}
    for raw_field, raw_value in raw.items():
        kind, name = DurationFields.parse(as_text(raw_field))
        value = as_text(raw_value)
        if not (value.isascii() and value.isdigit()) or len(value) > _MAX_DIGITS:
            continue
        if kind == DurationFields.SUM:
            found.setdefault(name, Histogram()).sum_ms += int(value)
        elif kind == DurationFields.INF:
            found.setdefault(name, Histogram()).counts[-1] += int(value)
        elif kind.isascii() and kind.isdigit() and len(kind) <= _MAX_DIGITS:
            index = bisect.bisect_left(DurationFields.BUCKETS_MS, int(kind))
            found.setdefault(name, Histogram()).counts[index] += int(value)
    return found


@dataclass(frozen=True)
class QueueSample:
    """What one scrape read of one queue."""

    counts: QueueCounts
    #: The Redis clock at the read, in ms since the epoch.
    now_ms: int
    durations: dict[str, Histogram]

    @property
    def oldest_queued_age(self) -> float:
        """Seconds the longest-waiting queued job has been due (0 when none is queued)."""
        oldest = self.counts.oldest_queued_at
        if oldest is None:
            return 0.0
        return max(0.0, self.now_ms / 1000 - oldest.timestamp())


def read_queue(queue: str) -> QueueSample:
    """Read ``queue``'s counts, duration histograms and the Redis clock.

    :func:`~django_rqueue.ops.counts.queue_counts` (two round trips, up to three
    more for the oldest queued job; on a Redis Cluster one more for the clock when the
    queue's outbox holds an entry), then one more pipelined round trip.

    Raises:
        RedisUnavailable: the queue's Redis cannot be reached.
    """
    counts = queue_counts(queue)
    ref = queue_ref(queue)
    now_ms, raw = hash_and_time(ref.client(), ref.keys.durations)
    return QueueSample(counts, now_ms, histograms(raw))


class QueueCollector(Collector):
    """Yields the metrics of every declared queue, read from Redis at each scrape."""

    def collect(self) -> Iterator[Metric]:
        samples: dict[str, QueueSample | None] = {}
        down: set[int] = set()
        for queue in get_config().queues:
            client = id(get_client(queue))
            samples[queue] = None
            if client in down:
                continue
            try:
                samples[queue] = read_queue(queue)
            except RedisUnavailable as exc:
                logger.warning("rqueue metrics: queue %r: %s", queue, exc)
                down.add(client)
        yield from queue_metrics(samples)
        if id(get_client()) in down:
            return  # the worker registry's Redis did not answer: not tried again
        try:
            workers = list_workers()
        except RedisUnavailable as exc:
            logger.warning("rqueue metrics: workers unknown: %s", exc)
        else:
            yield from worker_metrics(workers, list(samples))


def queue_metrics(samples: Mapping[str, QueueSample | None]) -> Iterator[Metric]:
    """The per-queue metrics of ``samples`` (``None``: the queue's Redis was down)."""
    up = GaugeMetricFamily(
        "rqueue_redis_up",
        "1 when the queue's Redis answered this scrape, else 0.",
        labels=["queue"],
    )
    jobs = GaugeMetricFamily(
        "rqueue_jobs",
        "Jobs by state (waiting: for their inputs, workflow nodes and depends_on; scheduled:"
        " delayed, or waiting for a retry; failed: in the failed store).",
        labels=["queue", "state"],
    )
    age = GaugeMetricFamily(
        "rqueue_oldest_queued_job_age_seconds",
        "How long the longest-waiting queued job has been due (0: none queued).",
        labels=["queue"],
    )
    paused = GaugeMetricFamily(
        "rqueue_queue_paused", "1 while the queue is paused (rqueue_pause).", labels=["queue"]
    )
    outbox = GaugeMetricFamily(
        "rqueue_outbox_pending",
        "Outcomes of the queue's jobs not yet delivered to their dependents on other queues"
        " (the pollers relay them).",
        labels=["queue"],
    )
    outbox_age = GaugeMetricFamily(
        "rqueue_outbox_oldest_age_seconds",
        "How long the oldest undelivered outcome has waited in the outbox, by the Redis clock"
        " (0: none; growing: no poller relays the queue).",
        labels=["queue"],
    )
    workflows = GaugeMetricFamily(
        "rqueue_workflows_running",
        "Workflows whose home is the queue that have not finished.",
        labels=["queue"],
    )
    finished = CounterMetricFamily(
        "rqueue_workflows_finished",
        "Workflows whose home is the queue that finished, by end state.",
        labels=["queue", "state"],
    )
    totals = {
        event: CounterMetricFamily(f"rqueue_jobs_{event}", text, labels=["queue"])
        for event, (_attr, text) in TOTALS.items()
    }
    durations = HistogramMetricFamily(
        "rqueue_job_duration_seconds",
        "Attempts ended by an ack or a failure report, by duration (Redis clock), per job name.",
        labels=["queue", "job"],
    )
    for queue, sample in samples.items():
        up.add_metric([queue], 0 if sample is None else 1)
        if sample is None:
            continue
        counts = sample.counts
        for state in JOB_STATES:
            jobs.add_metric([queue, state], getattr(counts, state))
        age.add_metric([queue], sample.oldest_queued_age)
        paused.add_metric([queue], 1 if counts.paused else 0)
        for event, (attr, _text) in TOTALS.items():
            totals[event].add_metric([queue], getattr(counts, attr))
        outbox.add_metric([queue], counts.outbox_pending)
        outbox_age.add_metric([queue], counts.outbox_oldest_age)
        workflows.add_metric([queue], counts.workflows_running)
        for state, attr in WORKFLOW_ENDS.items():
            finished.add_metric([queue, state], getattr(counts, attr))
        for name in sorted(sample.durations):
            histogram = sample.durations[name]
            durations.add_metric([queue, name], histogram.cumulative(), histogram.sum_ms / 1000)
    yield from (up, jobs, age, paused, *totals.values(), durations)
    yield from (outbox, outbox_age, workflows, finished)


def worker_metrics(workers: list[WorkerInfo], queues: list[str]) -> Iterator[Metric]:
    """``rqueue_workers`` and ``rqueue_queue_workers`` of the live ``workers``."""
    yield GaugeMetricFamily(
        "rqueue_workers", "Live workers (rqueue_work masters).", value=len(workers)
    )
    per_queue = GaugeMetricFamily(
        "rqueue_queue_workers", "Live workers that take the queue's jobs.", labels=["queue"]
    )
    for queue in queues:
        per_queue.add_metric([queue], sum(1 for w in workers if queue in w.queues))
    yield per_queue


#: The registry the view exposes: ours alone, so importing this module adds
#: nothing to ``prometheus_client.REGISTRY`` (the process' own metrics).
registry = CollectorRegistry(auto_describe=False)
registry.register(QueueCollector())


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The metrics of every declared queue in Prometheus' text format (module docstring).

    Always 200 for a GET or HEAD, even when a Redis is down
    (``rqueue_redis_up`` says so). Mount it where only the scraper reaches
    it, or wrap it in an access check: it needs no login of its own.
    """
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
