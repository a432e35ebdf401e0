"""``@job(sensitive=...)`` (django_rqueue.sensitive): declared, recorded, hidden from people,
and still given to the job, against a real redis-server and an in-process worker."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from django_rqueue import JobContext, JobStatus, get_job, job, registry
from django_rqueue.display import shown_arguments
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.sensitive import MASK, Sensitive
from tests.conftest import Event
from tests.jobs_app.jobs import log_in, read_ledger
from tests.support.inprocess import run_worker

KEYS = QueueKeys.of("rqueue", "default")
SECRET = "hunter2-SECRET"

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


@job(sensitive=("token", "pin"))
def with_keyword_only(user: str, token: str, *, pin: str = "") -> None:
    """Declared in the test process only."""


@job(sensitive=("api_key",))
def with_any_keyword(user: str, **extra: Any) -> None:
    """``api_key`` can only arrive through ``**extra``."""


def test_a_sensitive_name_that_is_no_parameter_is_refused_at_decoration_and_named():
    with pytest.raises(ValueError, match=r"'passwd', 'tokn', which are not parameters of") as e:

        @job(sensitive=("password", "passwd", "tokn"))
        def typo(user: str, password: str) -> None: ...

    assert "(user, password)" in str(e.value)


def test_star_args_star_kwargs_and_the_context_cannot_be_sensitive():
    def spread(user: str, *values: str, **options: str) -> None: ...

    for name in ("values", "options"):
        with pytest.raises(ValueError, match=f"'{name}', which is not a parameter"):
            job(sensitive=(name,))(spread)
    with pytest.raises(ValueError, match="'context', which is not a parameter"):

        @job(takes_context=True, sensitive=("context",))
        def needs(context: JobContext, secret: str) -> None: ...


def test_a_single_string_is_refused_as_the_list_of_names():
    with pytest.raises(TypeError, match=r"such as \('password',\); got 'password'"):

        @job(sensitive="password")  # a str is an Iterable[str]: refused at run time
        def one(password: str) -> None: ...


def test_a_function_with_star_kwargs_may_hide_any_keyword():
    assert with_any_keyword.sensitive == Sensitive(names=frozenset({"api_key"}))


def test_positions_count_after_the_context_of_a_takes_context_job():
    @job(takes_context=True, sensitive=("secret",))
    def needs(context: JobContext, user: str, secret: str) -> None: ...

    assert needs.sensitive == Sensitive(frozenset({"secret"}), frozenset({1}))


def test_the_record_names_the_hidden_arguments_and_still_holds_the_real_values(
    redis_client: redis.Redis,
):
    enqueued = log_in.delay("/dev/null", "alice", password=SECRET)
    raw = redis_client.hgetall(KEYS.job(enqueued.id))

    assert json.loads(raw[JobFields.SENSITIVE.encode()]) == {"k": ["password"], "a": [2]}
    assert SECRET.encode() in raw[b"p"]  # hiding is not encryption (ENCRYPTION_KEYS is)
    read = get_job(enqueued.id)
    assert read is not None and read.kwargs == {"password": SECRET}  # code sees real values


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [(("/l", "alice"), {"password": SECRET}), (("/l", "alice", SECRET), {})],
    ids=["keyword", "positional"],
)
def test_people_see_the_mask_whether_the_value_was_passed_by_keyword_or_position(
    args: tuple[str, ...], kwargs: dict[str, str]
):
    enqueued = log_in.delay(*args, **kwargs)
    read = get_job(enqueued.id)
    assert read is not None

    shown_args, shown_kwargs = shown_arguments(read)

    assert SECRET not in json.dumps([shown_args, shown_kwargs])
    assert shown_args[:2] == ["/l", "alice"]
    assert MASK in shown_args or shown_kwargs == {"password": MASK}
    assert shown_arguments(enqueued) == (shown_args, shown_kwargs)  # the Job .delay() returned


def test_keyword_only_and_star_kwargs_values_are_hidden():
    first = get_job(with_keyword_only.delay("bob", "tok-1234", pin="9876").id)
    second = get_job(with_any_keyword.delay("bob", api_key="k-5678", page=2).id)
    assert first is not None and second is not None

    assert shown_arguments(first) == (["bob", MASK], {"pin": MASK})
    assert shown_arguments(second) == (["bob"], {"api_key": MASK, "page": 2})


def test_a_process_that_does_not_know_the_job_hides_what_the_record_names(
    monkeypatch: pytest.MonkeyPatch,
):
    enqueued = log_in.delay("/l", "alice", password=SECRET)
    monkeypatch.delitem(registry._registry, log_in.name)  # the web server never imported it

    read = get_job(enqueued.id)
    assert read is not None
    assert shown_arguments(read) == (["/l", "alice"], {"password": MASK})


def test_an_unreadable_list_of_hidden_arguments_hides_every_argument(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
):
    enqueued = log_in.delay("/l", "alice", password=SECRET)
    redis_client.hset(KEYS.job(enqueued.id), JobFields.SENSITIVE, "{not json")
    monkeypatch.delitem(registry._registry, log_in.name)

    read = get_job(enqueued.id)
    assert read is not None
    assert shown_arguments(read) == ([MASK, MASK], {"password": MASK})


def test_the_job_and_signal_receivers_get_the_real_values_and_errors_hide_them(
    ledger: str, events: list[Event]
):
    failing = log_in.delay(ledger, "alice", password=SECRET)
    passing = log_in.delay(ledger, "bob", "right")

    run_worker(burst=True)

    assert [e["password"] for e in read_ledger(ledger)] == [SECRET, "right"]
    done = get_job(passing.id)
    assert done is not None and done.result == "welcome bob"
    failed = get_job(failing.id)
    assert failed is not None and failed.status is JobStatus.FAILED and failed.error is not None
    assert failed.error["message"] == f"wrong password '{MASK}' for alice"
    assert SECRET not in failed.error["traceback"]
    assert f"PermissionError: wrong password '{MASK}' for alice" in failed.error["traceback"]
    (enqueued,) = [kw["job"] for name, _, kw in events if name == "job_enqueued"][:1]
    assert enqueued.kwargs == {"password": SECRET}  # receivers are code: real values
    (final,) = [kw for name, _, kw in events if name == "job_failed"]
    assert SECRET in str(final["exception"]) and SECRET not in final["traceback"]


def test_short_values_are_not_looked_for_in_errors():
    hidden = Sensitive(frozenset({"pin", "words"}))
    assert hidden.values([], {"pin": "123", "words": ["abcd", {"x": "efghi"}, 7]}) == [
        "efghi",
        "abcd",
    ]
