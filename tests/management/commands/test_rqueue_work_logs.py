"""What a real ``rqueue_work`` process logs about failing jobs and about itself at start:
the level, the error and the advice of each line (Python logging, as the project's
``LOGGING`` formats it: ``<time> <LEVEL> <logger>: <message>``).
"""

from __future__ import annotations

import re
import signal
import socket

import redis

from django_rqueue import JobStatus, get_job, job
from tests.jobs_app.jobs import fail_always, fault_suicide, log_in, read_ledger, record
from tests.support.jobs_in_state import enqueue_raw
from tests.support.processes import CommandProcess, command_env
from tests.support.waiting import wait_until

from .conftest import Manage
from .test_rqueue_work import job_lines, wait_serving


@job(max_attempts=3)
def not_in_a_jobs_module() -> None:
    """Registered in the test process only: no worker imports this module."""


def _ended(job_id: str) -> bool:
    found = get_job(job_id)
    return found is not None and found.status in (JobStatus.FAILED, JobStatus.SUCCEEDED)


def _stop(worker: CommandProcess) -> None:
    worker.signal(signal.SIGTERM)
    assert worker.wait(10) == 0, worker.report()


def test_a_retried_attempt_is_a_warning_and_a_final_failure_an_error_with_its_traceback(
    manage: Manage, ledger: str, rqueue_redis: redis.Redis
) -> None:
    worker = manage("rqueue_work", "--queues", "default")
    wait_serving(worker, rqueue_redis)

    failing = fail_always.delay(ledger, "gateway")  # 3 attempts, 0.1 s then 0.2 s apart
    wait_until(lambda: _ended(failing.id), timeout=10, message="the job did not fail")
    log = wait_until(
        lambda: worker.stderr() if len(job_lines(worker.stderr(), failing.id)) == 3 else "",
        timeout=5,
        message="three attempt lines",
    )

    first, second, last = job_lines(log, failing.id)
    for line, attempt in ((first, 1), (second, 2)):
        assert " WARNING django_rqueue.worker: " in line, line
        assert f"attempt={attempt}/3 outcome=retrying" in line, line
        assert re.search(r" duration_ms=\d+ retry_in=\d+\.\ds error=", line), line
        assert "error='RuntimeError: boom gateway'" in line, line
    assert " ERROR django_rqueue.worker: " in last, last
    assert "attempt=3/3 outcome=failed" in last and "error='RuntimeError: boom gateway'" in last
    after = log.split(last, 1)[1].splitlines()
    assert after[1] == "Traceback (most recent call last):", after[:3]
    assert 'raise RuntimeError(f"boom {tag}")' in "\n".join(after[1:20])
    assert "RuntimeError: boom gateway" in after[1:20]
    _stop(worker)


def test_an_unknown_job_is_an_error_that_says_where_workers_find_jobs(
    manage: Manage, rqueue_redis: redis.Redis
) -> None:
    worker = manage("rqueue_work", "--queues", "default")
    wait_serving(worker, rqueue_redis)

    unknown = not_in_a_jobs_module.delay()
    wait_until(lambda: _ended(unknown.id), timeout=10, message="the unknown job did not fail")
    (line,) = wait_until(lambda: job_lines(worker.stderr(), unknown.id), timeout=5)

    assert " ERROR django_rqueue.worker: " in line, line
    assert "UnknownJob: no @job named 'tests.management.commands.test_rqueue_work_logs" in line
    assert "Workers import the 'jobs' module of every app in INSTALLED_APPS" in line, line
    stored = get_job(unknown.id)
    assert stored is not None and "Workers import the 'jobs' module" in stored.error["message"]  # type: ignore[index]
    _stop(worker)


def test_a_lost_worker_process_is_an_error_with_what_to_do(
    manage: Manage, ledger: str, rqueue_redis: redis.Redis
) -> None:
    worker = manage("rqueue_work", "--queues", "default")
    wait_serving(worker, rqueue_redis)

    killed = fault_suicide.delay(ledger, "oom")  # SIGKILLs its child on every attempt
    (line, *_) = wait_until(
        lambda: job_lines(worker.stderr(), killed.id), timeout=15, message="no line"
    )

    assert " ERROR django_rqueue.worker: " in line, line
    assert "attempt=1/3 outcome=retrying" in line, line
    assert "reason='worker process died (signal 9, SIGKILL)'" in line, line
    assert line.count("worker process died") == 1, line  # said once, not again as error='...'
    assert "out-of-memory killer" in line, line
    _stop(worker)


def test_the_worker_logs_its_registered_jobs_at_start(
    manage: Manage, rqueue_redis: redis.Redis
) -> None:
    quiet = manage("rqueue_work", "--queues", "default")
    wait_serving(quiet, rqueue_redis)
    verbose = manage("rqueue_work", "--queues", "default", "-v", "2")
    wait_serving(verbose, rqueue_redis)

    registered = [line for line in quiet.stderr().splitlines() if "registered from" in line]
    assert len(registered) == 1, quiet.stderr()
    assert " INFO django_rqueue.supervisor: " in registered[0]
    assert re.search(r": \d+ job\(s\) registered from .*tests\.jobs_app\.jobs", registered[0])
    assert "job tests.jobs_app.jobs.record" not in quiet.stderr()
    names = [line for line in verbose.stderr().splitlines() if ": job tests.jobs_app." in line]
    assert any(line.endswith(f"job {record.name}") and " DEBUG " in line for line in names), names
    _stop(quiet)
    _stop(verbose)


def test_a_worker_started_with_redis_down_says_which_server_and_why(manage: Manage) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    worker = manage(
        "rqueue_work",
        "--queues",
        "default",
        env=command_env(redis_url=f"redis://:s3cret@127.0.0.1:{port}/0"),
    )
    line = wait_until(
        lambda: next((x for x in worker.stderr().splitlines() if "retrying in" in x), ""),
        timeout=10,
        message="no retry line",
    )

    assert " ERROR django_rqueue.supervisor: " in line, line
    assert f"127.0.0.1:{port}" in line and "Connection refused" in line, line
    assert "s3cret" not in worker.stderr()
    _stop(worker)
    assert "starting without it" not in worker.stderr(), worker.stderr()


def test_a_job_name_with_a_newline_cannot_forge_a_log_line(
    manage: Manage, rqueue_redis: redis.Redis
) -> None:
    worker = manage("rqueue_work", "--queues", "default")
    wait_serving(worker, rqueue_redis)
    forged = "2030-01-01 00:00:00,000 INFO django_rqueue.worker: all is well"
    job_id = enqueue_raw(f"app.jobs.evil\n{forged}", '{"a": [], "k": {}}')
    wait_until(lambda: _ended(job_id), timeout=10, message="the job did not fail")
    (line,) = wait_until(lambda: job_lines(worker.stderr(), job_id), timeout=5)
    assert f"app.jobs.evil\\n{forged}" in line, line  # escaped, on the job's own line
    assert not any(text.startswith(forged) for text in worker.stderr().splitlines())
    _stop(worker)


def test_a_sensitive_argument_quoted_by_the_error_is_masked_in_the_log_lines(
    manage: Manage, ledger: str, rqueue_redis: redis.Redis
) -> None:
    secret = "hunter2-SECRET"
    worker = manage("rqueue_work", "--queues", "default")
    wait_serving(worker, rqueue_redis)

    failing = log_in.delay(ledger, "alice", password=secret)  # raises quoting the password
    wait_until(lambda: _ended(failing.id), timeout=10, message="the job did not fail")
    (line,) = wait_until(lambda: job_lines(worker.stderr(), failing.id), timeout=5)
    _stop(worker)

    log = worker.stderr()
    assert [e["password"] for e in read_ledger(ledger)] == [secret]  # the job got it
    assert " ERROR django_rqueue.worker: " in line, line
    assert "error=\"PermissionError: wrong password '********' for alice\"" in line, line
    after = log.split(line, 1)[1].splitlines()
    assert after[1] == "Traceback (most recent call last):", after[:3]
    assert "PermissionError: wrong password '********' for alice" in after[1:20]
    assert secret not in log
