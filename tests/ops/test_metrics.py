"""The Prometheus view (django_rqueue.ops.metrics, aliased as django_rqueue.metrics), on Redis.

Jobs go through the real transitions (enqueue, reserve, ack, fail, the
poller's reclaim, pause) and through an in-process worker; the view is
fetched with Django's test client (mounted at ``/metrics/`` in
``tests/urls.py``) and its text parsed with ``prometheus_client``'s own
parser. A duration the test controls is made by moving a running job's
``started_at`` back on the Redis clock, the one the scripts measure with.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.test import Client
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue.engine.connection import get_client, redis_time_ms
from django_rqueue.engine.fields import DurationFields
from django_rqueue.execution import error_record
from django_rqueue.master.heartbeat import publish
from django_rqueue.ops import operations
from django_rqueue.ops.metrics import histograms
from django_rqueue.ops.workers import WorkerInfo
from django_rqueue.worker.poller import Poller
from tests.jobs_app.jobs import fail_then_succeed, record, slow
from tests.jobs_app.tasks import record_task
from tests.support import transitions
from tests.support.inprocess import run_worker
from tests.support.jobs_in_state import Jobs, retention
from tests.support.redis_cluster import LocalCluster
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_until

from . import dependents

RECORD = "tests.jobs_app.jobs.record"
#: Seconds a report may take on a slow host, on top of a duration the test sets.
SLACK = 1.0
QUEUES = ("default", "emails", "low")  # tests/settings.py


class Scrape:
    """One GET of the view, parsed: samples by name and labels."""

    def __init__(self, client: Client) -> None:
        response = client.get("/metrics/")
        assert response.status_code == 200
        assert response["Content-Type"] == CONTENT_TYPE_LATEST
        self.families = {f.name: f for f in text_string_to_metric_families(response.text)}
        self.samples: list[Sample] = [s for f in self.families.values() for s in f.samples]

    def value(self, name: str, **labels: str) -> float:
        """The one sample named ``name`` with exactly ``labels``."""
        found = [s.value for s in self.samples if s.name == name and s.labels == labels]
        assert len(found) == 1, (name, labels, found)
        return found[0]

    def per_queue(self, name: str, **labels: str) -> dict[str, float]:
        """``name``'s samples with ``labels`` besides ``queue``, by queue."""
        return {
            s.labels["queue"]: s.value
            for s in self.samples
            if s.name == name and {k: v for k, v in s.labels.items() if k != "queue"} == labels
        }

    def buckets(self, queue: str, job: str) -> dict[str, float]:
        """The duration histogram of ``job`` on ``queue``: le -> cumulative count."""
        return {
            s.labels["le"]: s.value
            for s in self.samples
            if s.name == "rqueue_job_duration_seconds_bucket"
            and (s.labels["queue"], s.labels["job"]) == (queue, job)
        }

    def jobs(self, queue: str = "default") -> dict[str, float]:
        return {
            s.labels["state"]: s.value
            for s in self.samples
            if s.name == "rqueue_jobs" and s.labels["queue"] == queue
        }

    def totals(self, queue: str = "default") -> dict[str, float]:
        events = ("enqueued", "succeeded", "failed", "retried", "reclaimed", "expired", "trimmed")
        return {e: self.value(f"rqueue_jobs_{e}_total", queue=queue) for e in events}


def cumulative(counts: dict[float, int]) -> dict[str, float]:
    """Prometheus buckets (every bound, then +Inf) of attempts counted by their own bucket."""
    bounds = [ms / 1000 for ms in DurationFields.BUCKETS_MS]
    out, running = {}, 0
    for bound in bounds:
        running += counts.get(bound, 0)
        out[repr(bound)] = float(running)
    out["+Inf"] = float(running + counts.get(float("inf"), 0))
    return out


def run_for(jobs: Jobs, job_id: str, ms: int) -> None:
    """Move the running job's start ``ms`` back on the Redis clock: its attempt lasts that
    long (and the time its report takes)."""
    jobs.client.hset(jobs.keys().job(job_id), "started_at", redis_time_ms(jobs.client) - ms)


def reserve(jobs: Jobs, lease_ms: int = 60_000) -> str:
    got = transitions.reserve(jobs.client, jobs.keys(), lease_ms=lease_ms, worker_id="w1")
    assert got is not None
    return got[0]


@pytest.fixture(scope="module")
def dead_url() -> Iterator[str]:
    """The URL of a redis-server that was started and stopped: nothing answers there."""
    with RedisServer() as server:
        url = server.url
    yield url


# -- what the transitions count ---------------------------------------------------------


def test_every_transition_is_counted_and_exposed(client: Client, jobs: Jobs) -> None:
    keys, client_ = jobs.keys(), jobs.client
    error = error_record(ValueError("boom"))
    # Succeeded after 2 s (each reserve below takes the only queued job).
    acked = jobs.queued()
    assert reserve(jobs) == acked
    run_for(jobs, acked, 2_000)
    transitions.ack(client_, keys, acked, 1, "null", 600)
    # Failed after 40 s, retried in a minute.
    retried = jobs.queued(max_attempts=2)
    assert reserve(jobs) == retried
    run_for(jobs, retried, 40_000)
    assert transitions.fail(client_, keys, retried, 1, error, 60_000, retention=retention())[0] == (
        "retrying"
    )
    # Failed for good after 0.4 s.
    failed = jobs.queued(max_attempts=1)
    assert reserve(jobs) == failed
    run_for(jobs, failed, 400)
    assert transitions.fail(client_, keys, failed, 1, error, -1, retention=retention())[0] == (
        "failed"
    )
    # A task (its name holds ":") acked after 7 s.
    task = jobs.queued(name="task:tests.jobs_app.tasks.record_task")
    assert reserve(jobs) == task
    run_for(jobs, task, 7_000)
    transitions.ack(client_, keys, task, 1, "null", 600)
    # A lost lease, reclaimed by the poller: queued again.
    lost = jobs.queued(max_attempts=2)
    assert reserve(jobs, lease_ms=1) == lost
    poller = Poller(["default"])

    def reclaimed() -> bool:
        poller.run_once()
        return jobs.state(lost) == "queued"

    wait_until(reclaimed, message="lease reclaimed")
    running = jobs.running()
    jobs.scheduled()
    jobs.queued()
    operations.pause_queue("emails")
    before = redis_time_ms(client_)

    scrape = Scrape(client)

    after = redis_time_ms(client_)
    assert scrape.per_queue("rqueue_redis_up") == dict.fromkeys(QUEUES, 1.0)
    assert scrape.jobs() == {
        "waiting": 0.0,
        "queued": 2.0,
        "scheduled": 2.0,
        "running": 1.0,
        "failed": 1.0,
    }
    states = ("waiting", "queued", "scheduled", "running", "failed")
    assert scrape.jobs("emails") == dict.fromkeys(states, 0.0)
    assert scrape.totals() == {
        "enqueued": 8.0,
        "succeeded": 2.0,
        "failed": 1.0,
        "retried": 1.0,
        "reclaimed": 1.0,
        "expired": 0.0,
        "trimmed": 0.0,
    }
    assert scrape.totals("low") == dict.fromkeys(scrape.totals("low"), 0.0)
    assert scrape.per_queue("rqueue_queue_paused") == {"default": 0.0, "emails": 1.0, "low": 0.0}
    # The oldest queued job is the reclaimed one (queued again with its enqueue time).
    enqueued_at = int(client_.hget(keys.job(lost), "at") or 0)
    age = scrape.value("rqueue_oldest_queued_job_age_seconds", queue="default")
    assert (before - enqueued_at) / 1000 - 1e-6 <= age <= (after - enqueued_at) / 1000 + 1e-6
    assert scrape.value("rqueue_oldest_queued_job_age_seconds", queue="emails") == 0.0
    # Durations: 2 s, 40 s and 0.4 s for `record`, 7 s for the task; the running job has none.
    assert scrape.buckets("default", RECORD) == cumulative({2.5: 1, 60.0: 1, 0.5: 1})
    assert scrape.value("rqueue_job_duration_seconds_count", queue="default", job=RECORD) == 3.0
    total = scrape.value("rqueue_job_duration_seconds_sum", queue="default", job=RECORD)
    assert 42.4 <= total <= 42.4 + 3 * SLACK
    task_name = "task:tests.jobs_app.tasks.record_task"
    assert scrape.buckets("default", task_name) == cumulative({7.5: 1})
    assert 7.0 <= scrape.value("rqueue_job_duration_seconds_sum", queue="default", job=task_name)
    assert {s.labels["job"] for s in scrape.samples if "job" in s.labels} == {RECORD, task_name}
    assert jobs.state(running) == "running"


def test_every_enqueue_path_counts_its_jobs(client: Client, ledger: str) -> None:
    record.delay(ledger, "one")
    record.using(delay=60).delay(ledger, "later")
    record.delay_many([((ledger, str(n)), {}) for n in range(5)])
    record_task.enqueue(ledger, "task")
    record.using(unique_key="once").delay(ledger, "first")
    record.using(unique_key="once").delay(ledger, "duplicate")  # refused: creates nothing

    scrape = Scrape(client)

    assert scrape.value("rqueue_jobs_enqueued_total", queue="default") == 9.0
    assert scrape.jobs() == {
        "waiting": 0.0,
        "queued": 8.0,
        "scheduled": 1.0,
        "running": 0.0,
        "failed": 0.0,
    }


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_a_worker_counts_what_it_runs(client: Client, ledger: str) -> None:
    for n in range(3):
        slow.delay(ledger, f"s{n}", 0.3)
    fail_then_succeed.delay(ledger, "flaky", 1)

    run_worker(burst=True)  # the retry waits for its backoff: not run in this burst

    scrape = Scrape(client)
    totals = scrape.totals()
    assert (totals["enqueued"], totals["succeeded"], totals["retried"]) == (4.0, 3.0, 1.0)
    assert scrape.jobs() == {
        "waiting": 0.0,
        "queued": 0.0,
        "scheduled": 1.0,
        "running": 0.0,
        "failed": 0.0,
    }
    slow_buckets = scrape.buckets("default", "tests.jobs_app.jobs.slow")
    assert slow_buckets["0.25"] == 0.0  # each ran 0.3 s at least
    assert slow_buckets["+Inf"] == 3.0
    assert scrape.value("rqueue_job_duration_seconds_sum", queue="default", job=slow.name) >= 0.9
    flaky = scrape.buckets("default", fail_then_succeed.name)
    assert flaky["+Inf"] == 1.0  # the failed attempt
    assert scrape.value("rqueue_workers") == 0.0  # a finished worker leaves the registry


def test_live_workers_are_counted_in_all_and_per_queue(
    client: Client, rqueue_redis: redis.Redis
) -> None:
    publish(WorkerInfo(id="w:1:a", queues=("default", "low")), ttl=30)
    publish(WorkerInfo(id="w:2:b", queues=("default",)), ttl=30)
    publish(WorkerInfo(id="w:3:c", queues=("emails",)), ttl=0.05)
    wait_until(lambda: not rqueue_redis.exists("rqueue:worker:w:3:c"), message="w:3 expired")

    scrape = Scrape(client)

    assert scrape.value("rqueue_workers") == 2.0
    assert scrape.per_queue("rqueue_queue_workers") == {"default": 2.0, "emails": 0.0, "low": 1.0}


# -- Redis down ---------------------------------------------------------------------------


def test_a_queue_whose_redis_is_down_reads_up_0_and_the_view_still_answers(
    client: Client, jobs: Jobs, settings: SettingsFixture, dead_url: str
) -> None:
    jobs.queued()
    queues = {**settings.RQUEUE["QUEUES"], "remote": {"REDIS_URL": dead_url}}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}

    scrape = Scrape(client)

    assert scrape.per_queue("rqueue_redis_up") == {**dict.fromkeys(QUEUES, 1.0), "remote": 0.0}
    assert scrape.jobs()["queued"] == 1.0
    remote = [s for s in scrape.samples if s.labels.get("queue") == "remote"]
    # Its workers are known: the worker registry is on the default Redis, which answers.
    assert [s.name for s in remote] == ["rqueue_redis_up", "rqueue_queue_workers"]
    assert scrape.value("rqueue_workers") == 0.0


def test_with_every_redis_down_only_up_0_is_exposed(
    client: Client, settings: SettingsFixture, dead_url: str
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": dead_url}

    scrape = Scrape(client)

    assert scrape.per_queue("rqueue_redis_up") == dict.fromkeys(QUEUES, 0.0)
    assert {s.name for s in scrape.samples} == {"rqueue_redis_up"}


def test_a_user_whose_key_pattern_misses_the_prefix_reads_up_0_not_a_500(
    client: Client, settings: SettingsFixture, rqueue_redis: redis.Redis
) -> None:
    rqueue_redis.execute_command(
        "ACL", "SETUSER", "elsewhere", "reset", "on", ">s3cret", "~other:*", "+@all"
    )
    host = settings.RQUEUE["REDIS_URL"].rsplit("@", 1)[-1].removeprefix("redis://")
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": f"redis://elsewhere:s3cret@{host}"}
    try:
        scrape = Scrape(client)
    finally:
        rqueue_redis.acl_deluser("elsewhere")

    assert scrape.per_queue("rqueue_redis_up") == dict.fromkeys(QUEUES, 0.0)


# -- cost ---------------------------------------------------------------------------------


def populate(jobs: Jobs, n: int) -> None:
    """``n`` more jobs in each state on the default queue, of the same names and groups."""
    keys = jobs.keys()
    for _ in range(n):
        jobs.queued()
        jobs.queued()
        jobs.queued(group="g", priority=5)  # reserved first: the one queue left is group ""
        jobs.scheduled()
        dependents.waiting(jobs)
        dependents.outbox_entry(jobs.client, jobs)
    for _ in range(n):
        job_id = reserve(jobs)
        transitions.ack(jobs.client, keys, job_id, 1, "null", 600)
        job_id = reserve(jobs)
        transitions.fail(jobs.client, keys, job_id, 1, "{}", -1, retention=retention())
        jobs.running()


def scrape_commands(client: Client, redis_client: redis.Redis) -> dict[str, int]:
    """The commands Redis ran for one scrape (``INFO commandstats``), by name."""
    redis_client.config_resetstat()
    Scrape(client)
    stats: dict[str, Any] = redis_client.info("commandstats")
    ignored = ("cmdstat_info", "cmdstat_config|resetstat")
    return {k: int(v["calls"]) for k, v in stats.items() if k not in ignored}


def test_a_scrape_costs_the_same_commands_with_few_or_many_jobs(
    client: Client, jobs: Jobs, rqueue_redis: redis.Redis
) -> None:
    publish(WorkerInfo(id="w:1:a", queues=("default",)), ttl=30)
    populate(jobs, 2)
    Scrape(client)  # the view's connections are open from here on
    few = scrape_commands(client, rqueue_redis)

    populate(jobs, 300)
    many = scrape_commands(client, rqueue_redis)

    assert Scrape(client).jobs() == {
        "waiting": 302.0,
        "queued": 302.0,
        "scheduled": 302.0,
        "running": 302.0,
        "failed": 302.0,
    }
    assert many == few
    # When written: 13 reads per queue (TIME among them), 3 more to find the oldest queued
    # job (one priority, one group), 2 for the worker registry: 44 commands in 11 round trips.
    assert sum(few.values()) < 50, few


# -- the module ---------------------------------------------------------------------------


def test_post_is_refused(client: Client) -> None:
    assert client.post("/metrics/").status_code == 405


def test_importing_the_view_adds_nothing_to_the_global_registry() -> None:
    assert not [m.name for m in REGISTRY.collect() if m.name.startswith("rqueue")]


def test_importing_without_prometheus_client_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] == "prometheus_client"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "django_rqueue.ops.metrics")
    monkeypatch.delitem(sys.modules, "django_rqueue.metrics")
    with pytest.raises(ImportError, match=r'pip install "django-rqueue\[prometheus\]"'):
        importlib.import_module("django_rqueue.metrics")


def test_a_bucket_of_another_bound_is_read_into_the_next_bound_up() -> None:
    found = histograms(
        {
            b"250:j": b"1",
            b"300:j": b"2",  # not a bound of ours: counted as <= 0.5 s
            b"9999999:j": b"1",  # beyond the last bound
            b"inf:j": b"1",
            b"sum:j": b"9000",
            b"junk": b"5",
            b"5:j": b"x",
        }
    )
    assert list(found) == ["j"]
    assert found["j"].cumulative()[6:8] == [("0.25", 1.0), ("0.5", 3.0)]
    assert found["j"].cumulative()[-1] == ("+Inf", 5.0)
    assert found["j"].sum_ms == 9000


def test_a_cluster_is_scraped_through_its_cluster_client(
    client: Client, redis_cluster: LocalCluster
) -> None:
    jobs = Jobs(get_client())
    jobs.queued()
    jobs.queued(queue="emails")

    scrape = Scrape(client)

    assert scrape.jobs()["queued"] == 1
    assert scrape.jobs("emails")["queued"] == 1
    assert scrape.per_queue("rqueue_redis_up") == dict.fromkeys(QUEUES, 1.0)
