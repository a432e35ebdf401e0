"""Admin pages of jobs encrypted at rest (``RQUEUE["ENCRYPTION_KEYS"]``): decrypted for the
page, and a job whose key is gone renders with the reason instead of failing."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.test import Client
from pytest_django.fixtures import Settings

from tests.jobs_app.jobs import record

from .conftest import BASE, MakeClient
from .test_pages import job_url

KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()


@pytest.fixture
def viewer(make_client: MakeClient) -> Client:
    return make_client("view_job")


def test_the_job_page_shows_the_decrypted_arguments(viewer: Client, settings: Settings):
    settings.RQUEUE = {**settings.RQUEUE, "ENCRYPTION_KEYS": [KEY_A]}
    enqueued = record.using(on_commit=False).delay("/l", "visible-tag")

    detail = viewer.get(job_url(enqueued.id))

    assert detail.status_code == 200
    assert b"visible-tag" in detail.content
    assert b"Corrupt record" not in detail.content


def test_a_job_whose_key_is_gone_renders_with_the_reason(viewer: Client, settings: Settings):
    settings.RQUEUE = {**settings.RQUEUE, "ENCRYPTION_KEYS": [KEY_A]}
    enqueued = record.using(on_commit=False).delay("/l", "hidden-tag")
    settings.RQUEUE = {**settings.RQUEUE, "ENCRYPTION_KEYS": [KEY_B]}

    detail = viewer.get(job_url(enqueued.id))
    listing = viewer.get(f"{BASE}queues/default/queued/")

    assert detail.status_code == listing.status_code == 200
    assert b"hidden-tag" not in detail.content
    assert b"encrypted with a key that is not in RQUEUE[&#x27;ENCRYPTION_KEYS&#x27;]" in (
        detail.content
    )
