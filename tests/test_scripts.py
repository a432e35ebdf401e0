"""The Lua script loader: include expansion, headers, and reloading after SCRIPT FLUSH."""

import re
from importlib import resources

import pytest
import redis

from django_rqueue.engine.scripts import load

TRANSITIONS = [
    "enqueue",
    "reserve",
    "renew",
    "ack",
    "ack_reserve",
    "fail",
    "promote",
    "reclaim",
    "retry",
    "cancel",
]


@pytest.mark.parametrize("name", TRANSITIONS)
def test_every_transition_has_a_keys_argv_header_and_expands_its_includes(name):
    raw = resources.files("django_rqueue.engine.scripts").joinpath(f"{name}.lua").read_text()
    header = raw.split("\n\n", 1)[0]
    assert header.startswith(f"-- {name}:")
    assert "KEYS[1]" in header
    assert "ARGV[1]" in header
    script = load(name)
    assert "--@include" not in script.source
    # Every KEYS[i] the body uses is documented in the header.
    used = set(re.findall(r"KEYS\[(\d+)\]", script.source.split("\n\n", 1)[1]))
    documented = set(re.findall(r"KEYS\[(\d+)\]", header))
    assert used <= documented


def test_each_include_is_expanded_once_per_script():
    source = load("cancel").source
    assert source.count("local function now_ms()") == 1
    assert source.count("local function push_queued(") == 1


def test_a_flushed_script_cache_is_reloaded_transparently(redis_client: redis.Redis):
    script = load("promote")
    keys = ["t:{q}:", "t:{q}:delayed", "t:{q}:prios", "t:{q}:stats", "t:{q}:notify", "t:{q}:wake"]
    assert script(redis_client, keys, [10]) == [0, -1]
    redis_client.script_flush()
    assert not redis_client.script_exists(script.sha)[0]
    assert script(redis_client, keys, [10]) == [0, -1]
    assert redis_client.script_exists(script.sha)[0]


def test_bad_arguments_are_rejected_before_any_write(redis_client: redis.Redis):
    keys = ["t:{q}:", "t:{q}:delayed", "t:{q}:prios", "t:{q}:stats", "t:{q}:notify", "t:{q}:wake"]
    with pytest.raises(redis.ResponseError, match="bad limit"):
        load("promote")(redis_client, keys, ["many"])
    assert redis_client.dbsize() == 0
