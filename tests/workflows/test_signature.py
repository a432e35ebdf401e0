"""Signatures (django_rqueue.workflows.signature): ``job.s()``, ``job.si()``, ``using()``, ``|``."""

from __future__ import annotations

import pytest

from django_rqueue.workflows import Chain, Signature
from tests.workflows.jobs import anything, fetch, fetch_async, parse, report, store


def test_s_keeps_the_call_and_the_job_functions_options() -> None:
    sig = fetch.using(priority=5).s("https://a")
    assert isinstance(sig, Signature)
    assert (sig.name, sig.args, dict(sig.kwargs), sig.immutable) == (
        fetch.name,
        ("https://a",),
        {},
        False,
    )
    assert sig.options.priority == 5
    assert repr(sig) == f"{fetch.name}.s('https://a')"


def test_si_is_immutable() -> None:
    sig = parse.si("text", strict=True)
    assert sig.immutable and sig.args == ("text",) and sig.kwargs == {"strict": True}
    assert repr(sig) == f"{parse.name}.si('text', strict=True)"


def test_s_accepts_arguments_that_fit_with_or_without_a_prepended_result() -> None:
    parse.s()  # after a parent: parse(<result>)
    parse.s("text")  # alone, or parse(<result>, "text") as strict
    report.s(title="t")  # context, then the prepended results, then title


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: parse.s("a", "b", "c"), "parse"),
        (lambda: parse.s(nope=1), "parse"),
        (lambda: report.s(), "title"),
        (lambda: fetch.si(), "url"),  # type: ignore[call-arg]
        (lambda: parse.si(strict=True), "text"),  # type: ignore[call-arg]
    ],
)
def test_arguments_that_cannot_fit_are_refused_with_delays_message(make, words: str) -> None:
    with pytest.raises(TypeError, match=words) as caught:
        make()
    assert "cannot be called with these arguments" in str(caught.value)


def test_using_returns_a_new_signature_with_the_merged_options() -> None:
    sig = fetch.s("u")
    moved = sig.using(queue="emails", on_dependency_failure="run")
    assert (moved.options.queue, moved.options.on_dependency_failure) == ("emails", "run")
    assert sig.options.queue is None and moved.args == sig.args
    assert moved.using(priority=3).options.queue == "emails"


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"priority": 101}, ValueError),
        ({"on_dependency_failure": "skip"}, ValueError),
        ({"depends_on": "default:x"}, TypeError),
        ({"colour": "red"}, TypeError),
    ],
)
def test_using_checks_as_job_function_using_does(options: dict[str, object], error: type) -> None:
    with pytest.raises(error):
        fetch.s("u").using(**options)  # type: ignore[arg-type]


def test_pipe_builds_one_flat_chain() -> None:
    a, b, c = fetch.s("u"), parse.s(), store.s()
    built = a | b | c
    assert isinstance(built, Chain) and built.members == (a, b, c)
    assert (a | (b | c)).members == (a, b, c)


def test_pipe_with_something_else_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        fetch.s("u") | anything  # type: ignore[operator]


def test_every_kind_of_job_function_makes_signatures() -> None:
    assert report.si(["r"], "t").args == (["r"], "t")  # the context is left out
    assert fetch_async.s("u").name == fetch_async.name
    with pytest.raises(TypeError, match="fetch_async"):
        fetch_async.si()  # type: ignore[call-arg]
