"""Running the tests as a least-privilege Redis user: ``RQUEUE_TEST_ACL=1``.

With that variable set, the Redis fixtures of ``tests/conftest.py`` create
:data:`USER` on the servers they hand out, with exactly the rules of
:func:`django_rqueue.engine.permissions.acl_rules` (the line of docs/howto/secure.md;
a test checks both are the same), and point ``RQUEUE`` and ``RQUEUE_TEST_REDIS_URL``
(worker subprocesses) at URLs that log in as that user. Test code keeps its own
clients of the default user, for setting up and inspecting data. After each
test, the user must have been refused nothing (``ACL LOG``): a refused command
is a rule the documented line lacks.

Usage::

    RedisServer(server_args())             # a server that has USER, even after a restart
    url = as_acl_user(server.url)          # the same URL, logged in as USER
    create_user(client)                    # ACL SETUSER USER ... on a running server
    assert refusals(client) == []          # ACL LOG entries of USER, minus TOLERATED
"""

from __future__ import annotations

import os
from typing import Any

import redis

from django_rqueue.engine.permissions import acl_rules

#: The environment variable that turns the mode on (any non-empty value but "0").
ENV = "RQUEUE_TEST_ACL"
USER = "rqueue-test"
PASSWORD = "rqueue-test-password"
PREFIX = "rqueue"
#: Refusals that are expected and handled: the persistence check reads ``CONFIG GET save``,
#: which the least-privilege user may not (``config|get`` can read the server's passwords).
TOLERATED = frozenset({"config|get"})


def enabled() -> bool:
    """Whether ``RQUEUE_TEST_ACL`` asks for the least-privilege user."""
    return os.environ.get(ENV, "") not in ("", "0")


def rules(*, cluster: bool = False) -> list[str]:
    """The rules :data:`USER` gets: :func:`acl_rules` for :data:`PREFIX`."""
    return acl_rules(PREFIX, cluster=cluster)


def server_args() -> list[str]:
    """``redis-server`` arguments that define :data:`USER` when the mode is on (so it
    survives a restart of the server), else none."""
    if not enabled():
        return []
    return ["--user", USER, "on", f">{PASSWORD}", *rules()]


def as_acl_user(url: str) -> str:
    """``redis://host:port/db`` (no credentials) logged in as :data:`USER`."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{USER}:{PASSWORD}@{rest}"


def create_user(client: redis.Redis, *, cluster: bool = False) -> None:
    """(Re)create :data:`USER` on ``client``'s server with its :func:`rules` and clear the
    ACL log."""
    given = rules(cluster=cluster)
    client.execute_command("ACL", "SETUSER", USER, "reset", "on", f">{PASSWORD}", *given)
    client.acl_log_reset()


def refusals(client: redis.Redis) -> list[str]:
    """What ``client``'s server refused :data:`USER` since :func:`create_user`, as
    ``"<reason>: <object>"`` (``"command: hset"``, ``"key: rqueue:x"``), less :data:`TOLERATED`."""
    entries: list[dict[str, Any]] = client.acl_log()
    return [
        f"{_text(e.get('reason'))}: {_text(e.get('object'))}"
        for e in entries
        if _text(e.get("username")) == USER and _text(e.get("object")) not in TOLERATED
    ]


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value
