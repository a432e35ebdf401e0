"""The queue handle (django_rqueue.engine.queue_ref): made from the setting as it is now."""

from __future__ import annotations

import pytest
from pytest_django.fixtures import Settings

from django_rqueue.conf import get_config
from django_rqueue.engine.connection import get_client
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.engine.queue_ref import queue_ref


def test_a_ref_holds_the_keys_config_lease_and_client_of_its_queue() -> None:
    config = get_config()
    ref = queue_ref("emails")
    assert ref.name == "emails"
    assert ref.keys == QueueKeys.of(config.key_prefix, "emails")
    assert ref.config is config.queue("emails")
    assert ref.lease_ms == int(config.lease * 1000)
    assert ref.client() is get_client("emails")
    assert queue_ref("emails") is ref  # cached while the setting stays


def test_a_ref_follows_a_changed_setting(settings: Settings) -> None:
    before = queue_ref("default")
    settings.RQUEUE = {**settings.RQUEUE, "KEY_PREFIX": "other", "LEASE": 7}
    after = queue_ref("default")
    assert after.keys == QueueKeys.of("other", "default")
    assert after.lease_ms == 7000
    assert before.keys != after.keys


def test_an_undeclared_queue_has_no_ref() -> None:
    with pytest.raises(ValueError, match="not declared"):
        queue_ref("nowhere")
