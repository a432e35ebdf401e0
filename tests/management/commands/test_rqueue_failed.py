"""``rqueue_failed list|show|retry|delete`` (run in-process with call_command)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from django_rqueue.sensitive import MASK
from tests.jobs_app.jobs import log_in
from tests.support.inprocess import run_worker
from tests.support.jobs_in_state import Jobs


def run(*args: str) -> str:
    out = StringIO()
    call_command("rqueue_failed", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_list_prints_an_aligned_table_and_totals(jobs: Jobs):
    a = jobs.failed(name="app.jobs.a", message="kaput")
    jobs.failed(queue="emails", name="app.jobs.b")
    out = run("list")
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "NAME", "FAILED", "AT", "(UTC)", "ATTEMPTS", "ERROR"]
    row = next(line for line in lines if line.startswith(a))
    assert "app.jobs.a" in row and "ValueError: kaput" in row and "1/1" in row
    assert lines[0].index("NAME") == row.index("app.jobs.a")  # aligned
    assert "default: 1, emails: 1" in out


def test_list_filters_by_queue_and_name_and_speaks_json(jobs: Jobs):
    jobs.failed(name="x")
    keep = jobs.failed(name="y")
    jobs.failed(queue="emails", name="y")
    data = json.loads(run("list", "--queue", "default", "--name", "y", "--json"))
    assert [j["id"] for j in data["jobs"]] == [keep]
    assert data["totals"] == {"default": 2}


def test_show_prints_each_attempts_traceback(jobs: Jobs):
    job_id = jobs.failed(message="deep trouble")
    out = run("show", job_id)
    assert "attempt 1: builtins.ValueError: deep trouble" in out
    assert "Traceback (most recent call last)" in out
    with pytest.raises(CommandError, match="no job"):
        run("show", "default:" + "0" * 22)


def test_retry_and_delete_by_id_report_refusals(jobs: Jobs):
    gone, failed, queued = jobs.failed(), jobs.failed(), jobs.queued()
    with pytest.raises(CommandError, match="1 job"):
        run("retry", failed, queued)
    assert jobs.state(failed) == "queued"
    assert f"{gone}: deleted" in run("delete", gone)
    assert jobs.state(gone) is None


def test_all_needs_yes_without_a_terminal(jobs: Jobs):
    job_id = jobs.failed()
    with pytest.raises(CommandError, match="--yes"):
        run("retry", "--all")
    assert jobs.state(job_id) == "failed"


def test_retry_all_with_a_name_filter(jobs: Jobs):
    a = [jobs.failed(name="a") for _ in range(3)]
    b = jobs.failed(name="b")
    data = json.loads(run("retry", "--all", "--name", "a", "--yes", "--json"))
    assert data == {"done": {"default": 3, "emails": 0, "low": 0}}
    assert {jobs.state(i) for i in a} == {"queued"} and jobs.state(b) == "failed"
    assert "default: 1 deleted" in run("delete", "--all", "--queue", "default", "--yes")
    assert jobs.state(b) is None


def test_ids_and_all_are_exclusive_and_queues_must_exist(jobs: Jobs):
    with pytest.raises(CommandError, match="--all"):
        run("retry")
    with pytest.raises(CommandError, match="unknown queue"):
        run("list", "--queue", "nope")


def test_a_refusal_is_reported_in_plain_words(jobs: Jobs):
    queued = jobs.queued()
    with pytest.raises(CommandError) as raised:
        run("retry", queued)
    assert str(raised.value) == "1 job(s) were not retried"
    with pytest.raises(CommandError) as raised:
        run("delete", "default:" + "0" * 22)
    assert str(raised.value) == "1 job(s) were not deleted"


def test_list_of_empty_failed_stores_prints_the_header_and_zero_totals(jobs: Jobs):
    out = run("list")
    assert out.splitlines()[0].split() == [
        "ID",
        "NAME",
        "FAILED",
        "AT",
        "(UTC)",
        "ATTEMPTS",
        "ERROR",
    ]
    assert "failed jobs per queue: default: 0, emails: 0, low: 0" in out
    assert json.loads(run("list", "--json")) == {
        "totals": {"default": 0, "emails": 0, "low": 0},
        "jobs": [],
    }


def test_job_data_cannot_drive_the_terminal(jobs: Jobs):
    """A name or an error carrying escape sequences is printed escaped, by list and show."""
    job_id = jobs.failed(name="app.jobs.\x1b[2Jevil\nname", message="\x1b]0;owned\x07 boom")
    listed, shown = run("list"), run("show", job_id)
    for out in (listed, shown):
        assert "\x1b" not in out and "\x07" not in out, out
        assert "\\x1b[2Jevil" in out and "\\x1b]0;owned\\x07 boom" in out
    assert "app.jobs.\\x1b[2Jevil\\nname  status=failed" in shown


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_sensitive_arguments_are_masked_in_every_output(tmp_path: Path):
    secret = "hunter2-SECRET"
    by_keyword = log_in.delay(str(tmp_path / "ledger"), "alice", password=secret)
    by_position = log_in.delay(str(tmp_path / "ledger"), "bob", secret)
    run_worker(burst=True)

    outputs = {
        "list": run("list"),
        "list --json": run("list", "--json"),
        "show": run("show", by_keyword.id, by_position.id),
        "show --json": run("show", "--json", by_keyword.id, by_position.id),
    }

    for how, out in outputs.items():
        assert secret not in out, how
        assert MASK in out, how
    shown = {j["id"]: (j["args"], j["kwargs"]) for j in json.loads(outputs["show --json"])}
    assert shown[by_keyword.id][1] == {"password": MASK}
    assert shown[by_position.id][0][1:] == ["bob", MASK]
