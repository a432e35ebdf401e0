"""The ACL line django-rqueue needs (django_rqueue.engine.permissions), against the documentation
and a real redis-server: the "Secure it" how-to (docs/howto/secure.md) gives the rules the code
checks, the Lua scripts send only commands those rules grant, and the probe names what a user
lacks without running anything."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from importlib import resources

import pytest
import redis

from django_rqueue.engine.permissions import (
    CLUSTER_COMMANDS,
    COMMANDS,
    acl_rules,
    missing,
)
from tests.support import redis_acl
from tests.support.processes import REPO
from tests.support.redis_server import RedisServer

SECURE = REPO / "docs" / "howto" / "secure.md"
KEYS = ["rqueue:{default}:permission-probe", "rqueue:permission-probe"]
PASSWORD = "s3cret"


def documented_acl_line() -> list[str]:
    """The rules of the how-to's ``ACL SETUSER rqueue on >password <rules>`` line."""
    text = SECURE.read_text(encoding="utf-8")
    lines: list[str] = re.findall(r"^ACL SETUSER rqueue on >\S+ (.+)$", text, flags=re.MULTILINE)
    (line,) = lines
    return line.split()


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as found:
        yield found


def user(server: RedisServer, name: str, *rules: str) -> redis.Redis:
    """A client of ``server`` logged in as a new user ``name`` with ``rules``."""
    with server.client() as admin:
        admin.execute_command("ACL", "SETUSER", name, "reset", "on", f">{PASSWORD}", *rules)
    return server.client(username=name, password=PASSWORD)


def test_the_docs_give_the_rules_the_code_checks_and_the_test_user_has() -> None:
    rules = documented_acl_line()

    assert rules == acl_rules("rqueue")
    assert rules == redis_acl.rules()  # RQUEUE_TEST_ACL=1 runs the tests as that user
    cluster = " ".join(f"+{name}" for name in CLUSTER_COMMANDS)
    assert f"add `{cluster}`" in SECURE.read_text(encoding="utf-8")


def test_the_acl_grants_every_command_of_the_lua_scripts() -> None:
    sent: set[str] = set()
    scripts = resources.files("django_rqueue.engine.scripts")
    for folder in (scripts, scripts / "include"):
        for item in folder.iterdir():
            if item.name.endswith(".lua"):
                found = re.findall(r"redis\.p?call\(\s*['\"](\w+)['\"]", item.read_text())
                sent |= {name.lower() for name in found}

    assert len(sent) > 20  # the pattern found the scripts' calls
    assert sent - set(COMMANDS) == set(), "commands a script sends that the ACL line lacks"


def test_the_documented_user_lacks_nothing(server: RedisServer) -> None:
    client = user(server, "complete", *acl_rules("rqueue"))

    assert not missing(client, KEYS, [*COMMANDS])


def test_the_probe_names_refused_commands_and_keys_and_runs_nothing(server: RedisServer) -> None:
    client = user(server, "narrow", "~other:*", "+@all", "-hset", "-client|unblock")

    found = missing(client, KEYS, [*COMMANDS])

    assert found.commands == ("client|unblock", "hset")
    assert found.keys == tuple(KEYS)
    with server.client() as admin:
        assert admin.dbsize() == 0
        ran = hashlib.sha1(b"return 0", usedforsecurity=False).hexdigest()
        assert admin.script_exists(ran) == [False], "SCRIPT LOAD was queued, never run"


def test_a_user_without_multi_is_told_so_and_nothing_else_is_sent(server: RedisServer) -> None:
    client = user(server, "nomulti", "~rqueue:*", "+@all", "-multi")

    found = missing(client, KEYS, [*COMMANDS])

    assert found.commands == ("multi",) and found.keys == ()
    with server.client() as admin:
        assert admin.dbsize() == 0
