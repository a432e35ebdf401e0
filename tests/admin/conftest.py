"""Fixtures for the admin tests: users with given permissions (``jobs`` is in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

BASE = "/admin/django_rqueue/dashboard/"

MakeClient = Callable[..., Client]


@pytest.fixture
def make_client(django_user_model: Any, db: None) -> MakeClient:
    """``make_client(*codenames, superuser=False, staff=True, csrf=False)``: a logged-in client."""
    count = [0]

    def make(
        *codenames: str, superuser: bool = False, staff: bool = True, csrf: bool = False
    ) -> Client:
        count[0] += 1
        user = django_user_model.objects.create_user(
            f"user{count[0]}", password="pw", is_staff=staff, is_superuser=superuser
        )
        for codename in codenames:
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label="django_rqueue", codename=codename)
            )
        client = Client(enforce_csrf_checks=csrf)
        client.force_login(user)
        return client

    return make


@pytest.fixture
def admin_client_rq(make_client: MakeClient) -> Client:
    """A superuser's client."""
    return make_client(superuser=True)
