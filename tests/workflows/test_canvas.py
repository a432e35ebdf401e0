"""Composition (django_rqueue.workflows.canvas): chain, group, chord, callbacks, options."""

from __future__ import annotations

import datetime

import pytest
from pytest_django.fixtures import Settings

from django_rqueue.workflows import NO_TIMEOUT, Chain, Group, chain, chord, get_workflow, group
from tests.workflows.jobs import fetch, mail, noop, parse, store, summarize


def test_chain_flattens_chains_without_options() -> None:
    a, b, c, d = fetch.s("u"), parse.s(), store.s(), noop.si()
    assert chain(a, chain(b, c), d).members == (a, b, c, d)
    inner = chain(b, c).on_error(noop.si())
    kept = chain(a, inner)
    assert kept.members == (a, inner)


def test_chain_needs_elements() -> None:
    with pytest.raises(ValueError, match="at least one"):
        chain()
    with pytest.raises(TypeError, match="signatures"):
        chain(fetch.s("u"), fetch)  # type: ignore[arg-type]


def test_group_takes_elements_or_one_iterable() -> None:
    sigs = [fetch.s(u) for u in "abc"]
    assert group(*sigs).members == tuple(sigs)
    assert group(s for s in sigs).members == tuple(sigs)
    assert group(sigs[0]).members == (sigs[0],)  # a group of one is still a group
    assert isinstance(group(), Group) and group().members == ()
    for junk in ("abc", 3, [fetch.s("u"), 3]):
        with pytest.raises(TypeError, match="signatures"):
            group(junk)  # type: ignore[arg-type]


def test_chord_is_a_group_then_its_body() -> None:
    header, body = [fetch.s("a"), fetch.s("b")], summarize.s()
    built = chord(header, body)
    assert isinstance(built, Chain) and isinstance(built.members[0], Group)
    assert built.members[0].members == tuple(header) and built.members[1] is body
    existing = group(header)
    assert chord(existing, body).members[0] is existing
    with pytest.raises(TypeError, match="chord body"):
        chord(header, summarize)  # type: ignore[arg-type]


def test_a_group_piped_into_a_signature_is_a_chord() -> None:
    head = group(fetch.s("a"), fetch.s("b"))
    built = head | summarize.s()
    assert isinstance(built, Chain) and built.members == (head, built.members[1])


def test_callbacks_and_options_make_copies() -> None:
    base = chain(fetch.s("u"), parse.s())
    alert, cleanup = mail.s(), noop.si()
    full = base.on_error(alert).on_complete(cleanup).using(dependency_timeout=60)
    assert (full.error_callback, full.complete_callback) == (alert, cleanup)
    assert full.dependency_timeout == 60 and full.has_options
    assert base.error_callback is None and not base.has_options
    hours = base.using(dependency_timeout=datetime.timedelta(hours=1))
    assert hours.dependency_timeout == 3600.0
    assert base.using(dependency_timeout=NO_TIMEOUT).dependency_timeout is NO_TIMEOUT


def test_a_callback_is_a_signature() -> None:
    with pytest.raises(TypeError, match="on_error"):
        chain(fetch.s("u")).on_error(group(noop.si()))
    with pytest.raises(TypeError, match="on_complete"):
        chain(fetch.s("u")).on_complete(noop)  # type: ignore[arg-type]


def test_a_bad_dependency_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="dependency_timeout"):
        chain(fetch.s("u")).using(dependency_timeout=0)


def test_delay_compiles_first_then_hands_over_to_the_creation() -> None:
    wf = chain(fetch.s("u"), parse.s()).delay()

    assert get_workflow(wf.id) is not None and len(wf.node_ids) == 2


def test_delay_raises_a_validation_error_before_anything(settings: Settings) -> None:
    with pytest.raises(TypeError, match="workflow node 0"):
        chain(parse.s(), store.s()).delay()  # parse gets nothing first: text is missing
    with pytest.raises(ValueError, match="not declared"):
        chain(fetch.s("u").using(queue="nowhere")).delay()
