"""``rqueue.E050``: the webhooks app without its HTTP client."""

from __future__ import annotations

import importlib.util

import pytest

from django_rqueue.contrib.webhooks.checks import check_httpx


def test_no_error_when_httpx_is_installed() -> None:
    assert check_httpx() == []


def test_an_error_naming_the_extra_when_httpx_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "httpx" else real(name, *a)
    )
    [error] = check_httpx()
    assert error.id == "rqueue.E050" and "django-rqueue[webhooks]" in (error.hint or "")
