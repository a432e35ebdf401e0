"""Key names and job ids (django_rqueue.engine.keys), and the Lua scripts' agreement with them."""

from __future__ import annotations

import re
from importlib import resources

import pytest
import redis
from redis.crc import key_slot

from django_rqueue import job
from django_rqueue.conf import RateLimit
from django_rqueue.engine import keys as keys_module
from django_rqueue.engine.fields import (
    RECORD_DEFAULTS,
    DurationFields,
    JobFields,
    StatsFields,
    WorkflowFields,
)
from django_rqueue.engine.keys import (
    DONE,
    DURATIONS,
    GROUP,
    GROUPFULL,
    GROUPRUN,
    JOB,
    NEXT,
    NOTIFY,
    OPENING,
    OUTBOX,
    PARKED,
    PAUSED,
    PRIOS,
    RATE,
    RING,
    SCHEDULE_ENTRY,
    SUCCEEDED,
    THROUGHPUT,
    WAITING,
    WORKFLOW,
    WORKFLOWS,
    QueueKeys,
    new_job_id,
    pollers_key,
    queue_of,
)
from django_rqueue.engine.scripts import load
from django_rqueue.execution import error_record
from django_rqueue.worker.poller import Poller
from tests.support import transitions
from tests.support.jobs_in_state import retention
from tests.support.waiting import wait_until


@job(queue="emails")
def keyed_job(n: int) -> int:
    return n


@job(queue="emails")
def text_job(text: str) -> str:
    return text


def test_a_job_id_is_the_queue_and_22_url_safe_characters():
    job_id = new_job_id("emails")
    assert re.fullmatch(r"emails:[A-Za-z0-9_-]{22}", job_id)
    assert queue_of(job_id) == "emails"


def test_job_ids_are_unique():
    assert len({new_job_id("q") for _ in range(10_000)}) == 10_000


@pytest.mark.parametrize("queue", ["default", "bulk.low", "a-b_c", "Q9"])
def test_queue_of_reads_back_any_valid_queue_name(queue: str):
    assert queue_of(new_job_id(queue)) == queue


@pytest.mark.parametrize(
    "job_id",
    ["", "default", "default:", ":" + "0" * 22, "x", "default:a b", "default:{tag}"]
    + ["default:" + "0" * 129],
)
def test_queue_of_rejects_ids_of_the_wrong_shape(job_id: str):
    assert queue_of(job_id) is None


@pytest.mark.parametrize("part", ["order-42", "a", "x" * 128, "invoice:2026:7", "0" * 21])
def test_queue_of_reads_a_caller_chosen_id(part: str):
    """``using(job_id=...)``: the queue is what comes before the first ``:``."""
    assert queue_of(f"emails:{part}") == "emails"


def test_every_key_of_a_queue_shares_one_cluster_slot():
    keys = QueueKeys.of("rqueue", "emails")
    names = [
        keys.job(new_job_id("emails")),
        keys.ring(-100),
        keys.group(5, "user:1"),
        keys.group(0, ""),
        keys.unique("reset:7"),
        keys.prios,
        keys.delayed,
        keys.reserved,
        keys.failed,
        keys.stats,
        keys.durations,
        keys.notify,
        keys.wake,
        keys.paused,
        keys.rate,
        keys.done(new_job_id("emails")),
        keys.schedule,
        keys.schedule_entry("nightly:digest"),
        keys.grouprun,
        keys.groupfull,
        keys.parked("user:1"),
        keys.parked(""),
        keys.waiting,
        keys.next(new_job_id("emails")),
        keys.outbox,
        keys.workflow(new_job_id("emails")),
        keys.workflows,
        keys.opening,
    ]
    assert all(name.startswith("rqueue:{emails}:") for name in names)
    assert len({key_slot(name.encode()) for name in names}) == 1
    assert key_slot(b"rqueue:{emails}:prios") != key_slot(b"rqueue:{default}:prios")


def test_the_documented_key_shapes():
    keys = QueueKeys.of("app:rq", "bulk")
    assert keys.base == "app:rq:{bulk}:"
    assert keys.job("bulk:ab") == "app:rq:{bulk}:job:bulk:ab"
    assert keys.ring(-3) == "app:rq:{bulk}:ring:-3"
    assert keys.group(7, "user:1") == "app:rq:{bulk}:group:7:user:1"
    assert keys.unique("k") == "app:rq:{bulk}:unique:k"
    assert keys.done("bulk:ab") == "app:rq:{bulk}:done:bulk:ab"
    assert keys.schedule == "app:rq:{bulk}:schedule"
    assert keys.schedule_entry("nightly") == "app:rq:{bulk}:schedule:nightly"
    assert (keys.prios, keys.delayed, keys.reserved, keys.failed) == (
        "app:rq:{bulk}:prios",
        "app:rq:{bulk}:delayed",
        "app:rq:{bulk}:reserved",
        "app:rq:{bulk}:failed",
    )
    assert (keys.stats, keys.notify, keys.wake, keys.paused, keys.rate) == (
        "app:rq:{bulk}:stats",
        "app:rq:{bulk}:notify",
        "app:rq:{bulk}:wake",
        "app:rq:{bulk}:paused",
        "app:rq:{bulk}:rate",
    )
    assert (keys.grouprun, keys.groupfull, keys.parked("user:1")) == (
        "app:rq:{bulk}:grouprun",
        "app:rq:{bulk}:groupfull",
        "app:rq:{bulk}:parked:user:1",
    )
    assert keys.durations == "app:rq:{bulk}:durations"


def test_the_documented_key_shapes_of_dependencies_and_workflows():
    keys = QueueKeys.of("app:rq", "bulk")
    assert (keys.waiting, keys.outbox) == ("app:rq:{bulk}:waiting", "app:rq:{bulk}:outbox")
    assert keys.next("bulk:ab") == "app:rq:{bulk}:next:bulk:ab"
    assert keys.workflow("bulk:W1") == "app:rq:{bulk}:wf:bulk:W1"
    assert (keys.workflows, keys.opening) == ("app:rq:{bulk}:wfs", "app:rq:{bulk}:wfopen")
    # The suffixes Lua derives from the base are those the members use.
    base = keys.base
    assert keys.waiting == base + WAITING and keys.outbox == base + OUTBOX
    assert keys.next("x") == base + NEXT + "x" and keys.workflow("x") == base + WORKFLOW + "x"
    assert (keys.workflows, keys.opening) == (base + WORKFLOWS, base + OPENING)


def test_the_module_docstring_lists_every_key_of_dependencies_and_workflows():
    doc = keys_module.__doc__ or ""
    listed = set(re.findall(r"^\s+<prefix>:\{<queue>\}:(.+?) {2,}", doc, re.MULTILINE))
    assert {"waiting", "next:<job id>", "outbox", "wf:<workflow id>", "wfs", "wfopen"} <= listed
    assert {"job:<job id>", "paused"} <= listed  # positive control: the older rows


def test_a_workflow_id_is_a_job_id_of_its_home_queue():
    workflow_id = new_job_id("bulk")
    assert queue_of(workflow_id) == "bulk"
    # The finisher's and the callbacks' ids (workflow id + ".f", ".e<gen>", ".c<gen>")
    # still name their queue: ID_PART_RE allows the dot.
    assert queue_of(workflow_id + ".f") == "bulk"
    assert queue_of("io:" + workflow_id.partition(":")[2] + ".e0") == "io"


@pytest.mark.parametrize(("k", "field"), [(0, "i:0"), (1, "i:1"), (10_000, "i:10000")])
def test_an_input_field_is_named_by_its_index(k: int, field: str):
    assert JobFields.input_part(k) == field


def test_the_dependency_fields_are_short_and_distinct():
    names = ["WORKFLOW", "DEPENDENTS", "INPUT_COUNT", "INPUTS_MISSING", "INPUTS_FAILED"]
    names += ["INPUTS_CANCELLED", "INPUT_IDS", "ON_DEPENDENCY_FAILURE", "PASS_SHAPE"]
    names += ["RELEASE_DELAY", "GATE", "CANCEL_BY_WORKFLOW"]
    values = [getattr(JobFields, n) for n in names]
    assert values == ["wf", "nx", "dn", "dw", "df", "dc", "di", "dp", "dr", "rd", "gt", "cxw"]
    every = [v for k, v in vars(JobFields).items() if k.isupper() and isinstance(v, str)]
    assert len(every) == len(set(every)), "two JobFields share a name"
    # No fixed field is mistaken for an input's, an error's or a payload part.
    assert not [v for v in every if v.startswith(("i:", "err:", "p:"))]


def test_the_workflow_record_fields_are_distinct():
    every = [v for k, v in vars(WorkflowFields).items() if k.isupper()]
    assert len(every) == len(set(every)) == 13
    assert (WorkflowFields.STATE, WorkflowFields.GENERATION) == ("st", "gen")


@pytest.mark.parametrize(
    "name",
    ["reserve", "promote", "reclaim", "enqueue", "enqueue_batch", "cancel", "retry", "ack", "fail"]
    + ["failed_batch", "schedule_sync", "schedule_claim", "schedule_run_now", "trim_failed"]
    + ["empty_queue", "wf_trim", "wf_cancel", "wf_rearm"],
)
def test_scripts_that_derive_keys_use_the_suffixes_of_keys_py(name: str):
    source = load(name).source
    derived = set(re.findall(r"base \.\. '([a-z]+:)'", source))
    assert derived, f"{name}.lua derives no key from the base"
    assert derived <= {JOB, RING, GROUP, DONE, SCHEDULE_ENTRY, PARKED, NEXT, WORKFLOW, "unique:"}


def test_scripts_derive_the_admin_keys_under_the_names_of_keys_py():
    assert f"base .. '{THROUGHPUT}'" in load("ack").source
    assert f"base .. '{THROUGHPUT}'" in load("fail").source
    assert f"base .. '{SUCCEEDED}'" in load("ack").source
    for name in ("ack", "ack_reserve", "fail"):
        assert f"base .. '{DURATIONS}'" in load(name).source, name
    keys = QueueKeys.of("p", "q")
    assert (keys.throughput, keys.succeeded) == ("p:{q}:throughput", "p:{q}:succeeded")
    assert keys.durations == "p:{q}:durations"


def test_the_lua_duration_buckets_are_those_of_keys_py():
    [listed] = re.findall(r"local DURATION_BOUNDS = \{([^}]*)\}", load("fail").source)
    assert tuple(int(b) for b in listed.split(",")) == DurationFields.BUCKETS_MS
    assert list(DurationFields.BUCKETS_MS) == sorted(set(DurationFields.BUCKETS_MS))


@pytest.mark.parametrize("name", ["app.jobs.send", "task:app.tasks.send", "a:b:c", "", "é x"])
def test_a_duration_field_reads_back_its_job_name_whatever_it_holds(name: str):
    assert DurationFields.parse(DurationFields.bucket(250, name)) == ("250", name)
    assert DurationFields.parse(DurationFields.bucket(None, name)) == ("inf", name)
    assert DurationFields.parse(DurationFields.total(name)) == ("sum", name)


@pytest.mark.parametrize(
    "name",
    ["reserve", "ack_reserve", "enqueue", "enqueue_batch", "promote", "reclaim", "retry"]
    + ["release", "run_now", "failed_batch", "schedule_claim", "schedule_run_now"],
)
def test_scripts_that_reserve_or_queue_jobs_read_the_paused_flag_of_keys_py(name: str):
    assert f"base .. '{PAUSED}'" in load(name).source
    assert QueueKeys.of("p", "q").paused == f"p:{{q}}:{PAUSED}"


@pytest.mark.parametrize(
    "name",
    ["reserve", "ack_reserve", "enqueue", "enqueue_batch", "promote", "reclaim", "retry"]
    + ["release", "run_now", "failed_batch", "schedule_claim", "schedule_run_now", "cancel"],
)
def test_scripts_that_reserve_queue_or_unlink_jobs_derive_the_parked_keys_of_keys_py(name: str):
    """Per-group concurrency: a group at its cap is parked (include/park_group.lua) by the
    scripts that reserve or queue its jobs, and unparked by cancel's unlink_queued."""
    source = load(name).source
    assert f"base .. '{PARKED}' .. group" in source
    if name != "cancel":
        assert f"base .. '{GROUPFULL}'" in source
    keys = QueueKeys.of("p", "q")
    assert (keys.groupfull, keys.parked("g")) == (f"p:{{q}}:{GROUPFULL}", f"p:{{q}}:{PARKED}g")


@pytest.mark.parametrize("name", ["ack", "ack_reserve", "fail", "reclaim", "release"])
def test_scripts_that_end_a_run_derive_the_keys_that_give_a_group_slot_back(name: str):
    """include/group_slot_free.lua: the count, the full set, and what unparking touches."""
    source = load(name).source
    for suffix in (GROUPRUN, GROUPFULL, PRIOS, NOTIFY, PAUSED):
        assert f"base .. '{suffix}'" in source, (name, suffix)
    keys = QueueKeys.of("p", "q")
    assert (keys.grouprun, keys.prios, keys.notify) == tuple(
        f"p:{{q}}:{n}" for n in (GROUPRUN, PRIOS, NOTIFY)
    )


@pytest.mark.parametrize("name", ["reserve", "ack_reserve"])
def test_the_reserving_scripts_keep_a_rate_limit_under_the_name_of_keys_py(name: str):
    assert f"base .. '{RATE}'" in load(name).source
    assert QueueKeys.of("p", "q").rate == f"p:{{q}}:{RATE}"


def test_every_key_the_scripts_write_is_a_name_keys_py_produces(redis_client: redis.Redis):
    """Drive every transition through the public API, then SCAN: no key has a foreign name."""
    keys = QueueKeys.of("rqueue", "emails")
    client = redis_client
    queued = [
        keyed_job.using(group="user:1", priority=5).delay(1),
        keyed_job.using(group="user:2", priority=5).delay(2),
        keyed_job.using(priority=-7).delay(3),
        keyed_job.using(unique_key="once:1", group="user:1").delay(4),
        keyed_job.using(max_attempts=1).delay(5),
    ]
    scheduled = keyed_job.using(delay=3600, unique_key="later").delay(6)
    due_soon = keyed_job.using(delay=0.001, group="late").delay(7)
    # Reserve a few (one with a lease that expires at once), fail one, cancel one.
    reserved = []
    while (got := transitions.reserve(client, keys, lease_ms=60_000, worker_id="w")) is not None:
        reserved.append(got[0])
        if len(reserved) == 2:
            break
    tiny = transitions.reserve(  # rate-limited: leaves its GCRA state for a minute
        client, keys, lease_ms=1, worker_id="w", rate_limit=RateLimit.parse("1/m")
    )
    assert tiny is not None
    error = error_record(ValueError("x"))
    transitions.fail(client, keys, reserved[0], 1, error, -1, retention=retention("emails"))
    transitions.cancel(client, keys, scheduled.id, mode="cancel", ttl=60)
    poller = Poller(["emails"])  # promotes due_soon and reclaims the tiny lease

    def settled() -> bool:
        poller.run_once()
        states = client.hmget(keys.job(tiny[0]), "s") + client.hmget(keys.job(due_soon.id), "s")
        return states == [b"queued", b"queued"]

    wait_until(settled, message="lease reclaimed and delayed job promoted")

    ids = [j.id for j in queued] + [scheduled.id, due_soon.id]
    groups = {"user:1", "user:2", "", "late"}
    expected = {keys.job(i) for i in ids}
    expected |= {keys.ring(p) for p in (5, 0, -7)}
    expected |= {keys.group(p, g) for p in (5, 0, -7) for g in groups}
    expected |= {keys.unique(u) for u in ("once:1", "later")}
    expected |= {keys.prios, keys.delayed, keys.reserved, keys.failed, keys.stats}
    expected |= {keys.notify, keys.wake, keys.throughput, keys.succeeded, keys.rate}
    expected |= {keys.durations}
    expected |= {pollers_key("rqueue")}  # the poller's record of life
    found = {k.decode() for k in client.scan_iter(match="*", count=1000)}
    assert found, "nothing was written"
    # Reserve calls leave a record named after their random request id.
    requests = [k.rpartition(":")[2] for k in found if k.startswith(f"{keys.base}reservation:")]
    assert len(requests) >= 2
    expected |= {keys.reservation(r) for r in requests}
    assert found <= expected, f"keys no keys.py name produces: {sorted(found - expected)}"
    # A positive control: the Lua-derived names of what is still queued are among them.
    must_exist = [
        keys.group(0, "user:1"),  # the reclaimed job
        keys.group(0, "late"),  # the promoted one
        keys.group(0, ""),
        keys.ring(0),
        keys.group(-7, ""),
        keys.ring(-7),
        keys.job(tiny[0]),
        keys.rate,
        keys.prios,
        keys.reserved,
        keys.failed,
        keys.stats,
        keys.durations,  # the failed attempt's duration
    ]
    assert [k for k in must_exist if k not in found] == []


def test_the_group_concurrency_keys_the_scripts_write_are_names_keys_py_produces(
    redis_client: redis.Redis,
):
    keys = QueueKeys.of("rqueue", "emails")
    first = keyed_job.using(group="user:1", priority=5).delay(1)
    keyed_job.using(group="user:1", priority=5).delay(2)
    got = transitions.reserve(
        redis_client, keys, lease_ms=60_000, worker_id="w", group_concurrency=1
    )
    assert got is not None and got[0] == first.id
    assert redis_client.hget(keys.job(first.id), JobFields.GROUP_SLOT) == b"1"
    found = {k.decode() for k in redis_client.scan_iter(match="*", count=1000)}
    jobs = {k for k in found if k.startswith(keys.job(""))}
    requests = {k for k in found if k.startswith(keys.reservation(""))}
    assert found - jobs - requests == {
        keys.grouprun,
        keys.groupfull,
        keys.parked("user:1"),  # at priority 5, which has no ring left: the one group is parked
        keys.group(5, "user:1"),
        keys.reserved,
        keys.stats,
        keys.notify,
    }


#: Job hash fields written after enqueue, which keep their full names (JobFields).
LATER_FIELDS = {"prio", "group", "attempts", "token", "worker", "started_at", "finished_at"}
LATER_FIELDS |= {"result", "error", "nerr"}


def test_every_job_hash_field_the_scripts_write_is_a_jobfields_name(redis_client: redis.Redis):
    """Jobs driven through every state: each hash field is a JobFields name or a later one."""
    keys = QueueKeys.of("rqueue", "emails")
    client = redis_client
    long_payload = "x" * 150  # stored in parts p, p:2, p:3
    done = text_job.using(priority=3, group="g", unique_key="u1").delay(long_payload)
    failed = keyed_job.using(max_attempts=1).delay(2)
    cancelled = keyed_job.using(delay=3600).delay(3)
    for _ in range(2):
        got = transitions.reserve(client, keys, lease_ms=60_000, worker_id="w")
        assert got is not None
        token = int(got[1][b"token"])
        if got[0] == done.id:
            transitions.ack(client, keys, done.id, token, result="7", result_ttl=60)
        else:
            error = error_record(ValueError("x"))
            transitions.fail(client, keys, got[0], token, error, -1, retention=retention("emails"))
    transitions.cancel(client, keys, cancelled.id, mode="cancel", ttl=60)

    allowed = {v for k, v in vars(JobFields).items() if k.isupper()} | LATER_FIELDS
    seen: set[str] = set()
    for job_id in (done.id, failed.id, cancelled.id):
        fields = {k.decode() if isinstance(k, bytes) else k for k in client.hkeys(keys.job(job_id))}
        assert fields, job_id
        seen |= fields
    parts = {f for f in seen if f.startswith(f"{JobFields.PAYLOAD}:")}
    errors = {f for f in seen if f.startswith(("err:", "err_at:"))}
    assert parts == {JobFields.payload_part(2), JobFields.payload_part(3)}
    assert errors == {JobFields.error_part(1), JobFields.error_time_part(1)}
    assert seen - parts - errors <= allowed, sorted(seen - parts - errors - allowed)
    # The enqueue-time names really are the short ones (positive control).
    assert {JobFields.STATE, JobFields.NAME, JobFields.UNIQUE_KEY, "finished_at"} <= seen


def test_no_script_spells_a_job_field_by_its_old_long_name():
    old = ["state", "enqueued_at", "run_at", "name", "payload", "max_attempts", "timeout_ms"]
    old += ["result_ttl", "unique_key"]
    scripts = resources.files("django_rqueue.engine.scripts")
    for name in sorted(p.name[:-4] for p in scripts.iterdir() if p.name.endswith(".lua")):
        code = "\n".join(
            line for line in load(name).source.splitlines() if not line.lstrip().startswith("--")
        )
        hits = [f for f in old if re.search(rf"'{f}'(?!,\s*(st|job\[1\]))", code)]
        assert hits == [], f"{name}.lua uses old field names {hits}"


def test_every_stats_counter_the_scripts_add_to_is_a_statsfields_name():
    scripts = resources.files("django_rqueue.engine.scripts")
    sources = [p.read_text() for p in scripts.iterdir() if p.name.endswith(".lua")]
    sources += [p.read_text() for p in scripts.joinpath("include").iterdir()]
    added = {m for text in sources for m in re.findall(r"add_count\(\w+, '(\w+)'", text)}
    assert added <= set(StatsFields.ALL), sorted(added - set(StatsFields.ALL))
    # Every counter is counted by some script, but those of workflows and dependencies,
    # whose scripts come with issue 26 (once they all count, this is an equality again).
    assert set(StatsFields.ALL) - added <= set(StatsFields.WORKFLOW_COUNTERS)
    assert StatsFields.QUEUED in added and StatsFields.CANCELLED in added
    assert len(StatsFields.ALL) == len(set(StatsFields.ALL))


def test_the_lua_record_defaults_are_those_of_keys_py():
    text = resources.files("django_rqueue.engine.scripts").joinpath("include/stored_default.lua")
    table = re.search(r"RECORD_DEFAULTS = \{(.*?)\}", text.read_text())
    assert table is not None
    pairs = dict(re.findall(r"(\w+) = (\d+)", table.group(1)))
    assert {name: int(value) for name, value in pairs.items()} == RECORD_DEFAULTS
