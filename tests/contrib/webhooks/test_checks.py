"""``rqueue.E050``: the webhooks app without its HTTP client; ``rqueue.E100``-``E102``:
``RQUEUE["WEBHOOKS"]``."""

from __future__ import annotations

import importlib.util

import pytest
from django.core.exceptions import ImproperlyConfigured
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue.conf import problems
from django_rqueue.contrib.webhooks.checks import check_httpx, check_webhook_settings
from django_rqueue.contrib.webhooks.conf import webhook_settings


def test_no_error_when_httpx_is_installed() -> None:
    assert check_httpx() == []


def test_an_error_naming_the_extra_when_httpx_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "httpx" else real(name, *a)
    )
    [error] = check_httpx()
    assert error.id == "rqueue.E050" and "django-rqueue[webhooks]" in (error.hint or "")


@pytest.mark.parametrize(
    ("webhooks", "ids", "text"),
    [
        ({"ALLOWED_HOSTS": ["hooks.internal", ".corp.example", "10.0.0.0/8", "::1"]}, [], ""),
        ({"ALLOWED_HOSTS": ("[::1]", "127.0.0.1", "fd00::/8")}, [], ""),
        ({"MAX_RESPONSE_BYTES": 0}, [], ""),
        ([], ["rqueue.E100"], "must be a dict"),
        ({"ALLOWED_HOST": []}, ["rqueue.E100"], "unknown key 'ALLOWED_HOST'"),
        ({"ALLOWED_HOSTS": "10.0.0.0/8"}, ["rqueue.E101"], "must be a list"),
        ({"ALLOWED_HOSTS": ["10.0.0.1/8"]}, ["rqueue.E101"], "'10.0.0.1/8': not a network"),
        ({"ALLOWED_HOSTS": ["ok.example", "bad host"]}, ["rqueue.E101"], "'bad host'"),
        ({"ALLOWED_HOSTS": ["http://x.example"]}, ["rqueue.E101"], "'http://x.example'"),
        ({"ALLOWED_HOSTS": [10]}, ["rqueue.E101"], "10: not a str"),
        ({"ALLOWED_HOSTS": ["*"]}, ["rqueue.E101"], "'*'"),
        ({"MAX_RESPONSE_BYTES": -1}, ["rqueue.E102"], "integer >= 0"),
        ({"ALLOWED_HOSTS": ["0.0.0.0/0"]}, ["rqueue.W100"], "allows every IPv4 address"),
        ({"ALLOWED_HOSTS": ["::/0"]}, ["rqueue.W100"], "allows every IPv6 address"),
        ({"MAX_RESPONSE_BYTES": "64k"}, ["rqueue.E102"], "integer >= 0"),
    ],
)
def test_the_webhooks_setting_is_checked(
    webhooks: object, ids: list[str], text: str, settings: SettingsFixture
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "WEBHOOKS": webhooks}
    found = check_webhook_settings()
    assert [message.id for message in found] == ids
    assert all(text in message.msg for message in found)
    assert not [p for p in problems(settings.RQUEUE) if p.is_serious()]  # a known key
    if any(message.is_serious() for message in found):
        with pytest.raises(ImproperlyConfigured, match=ids[0]):
            webhook_settings()
    else:
        webhook_settings()
