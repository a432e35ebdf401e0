"""The Lua script loader: include expansion, headers, and reloading after SCRIPT FLUSH."""

import re
import threading
from importlib import resources

import pytest
import redis

from django_rqueue.engine.scripts import LuaScript, load
from tests.faults.proxy import FaultProxy
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_until

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
    "schedule_sync",
    "schedule_due",
    "schedule_claim",
    "schedule_run_now",
    "pause",
    "resume",
]


@pytest.mark.parametrize("name", TRANSITIONS)
def test_every_transition_has_a_keys_argv_header_and_expands_its_includes(name):
    raw = resources.files("django_rqueue.engine.scripts").joinpath(f"{name}.lua").read_text()
    header = raw.split("\n\n", 1)[0]
    assert header.startswith(f"-- {name}:")
    assert "KEYS[1]" in header
    assert "ARGV[1]" in header or "(no ARGV)" in header
    script = load(name)
    assert "--@include" not in script.source
    # Every KEYS[i] the body uses is documented in the header.
    used = set(re.findall(r"KEYS\[(\d+)\]", script.source.split("\n\n", 1)[1]))
    documented = set(re.findall(r"KEYS\[(\d+)\]", header))
    assert used <= documented


def test_each_include_is_expanded_once_per_script():
    # ack_reserve.lua reaches now_ms.lua twice: through ack_job.lua and reserve_next.lua.
    source = load("ack_reserve").source
    assert source.count("local function now_ms()") == 1
    assert source.count("local function ack_job(") == 1


SCRIPTS = resources.files("django_rqueue.engine.scripts")
INCLUDES = sorted(
    p.name.removesuffix(".lua")
    for p in SCRIPTS.joinpath("include").iterdir()
    if p.name.endswith(".lua")
)


@pytest.mark.parametrize("name", INCLUDES)
def test_each_include_defines_one_function_named_after_its_file(name):
    text = SCRIPTS.joinpath("include", f"{name}.lua").read_text()
    assert re.findall(r"^local function (\w+)\(", text, re.MULTILINE) == [name]


def _lua_files() -> list[str]:
    tops = [p.name for p in SCRIPTS.iterdir() if p.name.endswith(".lua")]
    return sorted(tops) + [f"include/{name}.lua" for name in INCLUDES]


@pytest.mark.parametrize("path", _lua_files())
def test_each_file_includes_exactly_the_functions_it_calls(path):
    text = SCRIPTS.joinpath(path).read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    own = set(re.findall(r"^local function (\w+)\(", text, re.MULTILINE))
    called = {n for n in INCLUDES if n not in own and re.search(rf"(?<![\w.]){n}\(", code)}
    included = set(re.findall(r"^--@include (\w+)\.lua$", text, re.MULTILINE))
    assert included == called


def test_a_flushed_script_cache_is_reloaded_transparently(redis_client: redis.Redis):
    script = load("promote")
    keys = ["t:{q}:", "t:{q}:delayed", "t:{q}:prios", "t:{q}:stats", "t:{q}:notify", "t:{q}:wake"]
    assert script(redis_client, keys, [10]) == [0, -1, 0, -1]
    redis_client.script_flush()
    assert not redis_client.script_exists(script.sha)[0]
    assert script(redis_client, keys, [10]) == [0, -1, 0, -1]
    assert redis_client.script_exists(script.sha)[0]


def test_a_script_cache_flushed_again_before_the_reloaded_call_is_reloaded_again(
    redis_server: RedisServer, redis_client: redis.Redis
):
    """Redis restarts twice in a row: the script is loaded on the first new Redis, which
    loses it before the call that follows (a second restart; here ``SCRIPT FLUSH``). The
    second ``NOSCRIPT`` is answered as the first, not raised (a worker's ack raised it and
    crashed its child, the ack applied and its ``job_succeeded`` never sent)."""
    script = LuaScript("twice", "return ARGV[1]")
    redis_client.script_flush()
    with FaultProxy(redis_server.port) as proxy:
        client = redis.Redis.from_url(proxy.url())
        proxy.cut_after(b"LOAD")  # SCRIPT LOAD reaches Redis; its reply is held
        outcome: list[object] = []
        thread = threading.Thread(target=lambda: outcome.append(called(script, client)))
        thread.start()
        wait_until(lambda: proxy.cut() == 1, timeout=10, message="the script was never loaded")
        wait_until(lambda: redis_client.script_exists(script.sha)[0], timeout=5)
        redis_client.script_flush()  # lost again before the EVALSHA that follows the load
        proxy.heal()
        thread.join(timeout=10)
        client.close()

    assert outcome == [b"x"]


def called(script: LuaScript, client: redis.Redis) -> object:
    try:
        return script(client, [], ["x"])
    except Exception as exc:  # what the test reports
        return exc


def test_bad_arguments_are_rejected_before_any_write(redis_client: redis.Redis):
    keys = ["t:{q}:", "t:{q}:delayed", "t:{q}:prios", "t:{q}:stats", "t:{q}:notify", "t:{q}:wake"]
    with pytest.raises(redis.ResponseError, match="bad limit"):
        load("promote")(redis_client, keys, ["many"])
    assert redis_client.dbsize() == 0


#: The scripts every plain job goes through (enqueue, reserve, ack or fail, reclaim).
PLAIN_PATH = ["enqueue", "enqueue_batch", "reserve", "ack", "ack_reserve", "fail", "reclaim"]
PLAIN_PATH += ["promote", "release", "renew"]
#: The dependency code: made only for a job with dependents (include/notify_dependents.lua).
DEPENDENCY_CODE = {"dep_notify", "dep_settle", "node_decide", "outcome"}


def _top_level_functions(source: str) -> list[str]:
    """The ``local function``s a script's chunk makes on each run (outside ``--@scope``)."""
    depth, names = 0, []
    for line in source.split("\n"):
        if line == "--@scope":
            depth += 1
        elif line == "--@end-scope":
            depth -= 1
        elif depth == 0 and (found := re.match(r"local function (\w+)\(", line)):
            names.append(found.group(1))
    return names


@pytest.mark.parametrize("name", PLAIN_PATH)
def test_a_job_without_dependents_runs_no_dependency_code(name: str):
    """Each ``local function`` of a script's chunk is a closure Redis makes on every run: the
    dependency code is made inside notify_dependents, only when a job has dependents."""
    top = _top_level_functions(load(name).source)
    assert DEPENDENCY_CODE.isdisjoint(top), sorted(DEPENDENCY_CODE & set(top))
    assert len(top) == len(set(top))


def _first_scope(source: str) -> str:
    """The lines of the first outermost ``--@scope`` (with the scopes nested in it)."""
    depth, lines = 0, []
    for line in source.split("\n"):
        if line == "--@scope":
            depth += 1
            if depth == 1:
                continue
        elif line == "--@end-scope":
            depth -= 1
            if depth == 0:
                break
        if depth:
            lines.append(line)
    return "\n".join(lines)


def test_a_scoped_include_is_expanded_inside_its_function_and_again_outside():
    source = load("ack").source
    scope = _first_scope(source)
    assert "local function dep_notify(" in scope and "local function dep_settle(" in scope
    # node_decide is made only by an arrival that completes a job, in a scope of its own.
    assert "node_decide" not in _top_level_functions(scope)
    assert "local function node_decide(" in scope
    # Positive control: a script that calls dep_notify itself makes it at the top level.
    assert "dep_notify" in _top_level_functions(load("dep_apply").source)
