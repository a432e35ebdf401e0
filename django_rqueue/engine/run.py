"""The executors that send commands to Redis: the only place a script call is sent and read back.

:func:`execute` runs one :class:`~.commands.Command` (or
:class:`~.commands.Plain`) on a sync client and returns what its parser
makes of the reply; :func:`aexecute` does the same on an asyncio client.
:func:`execute_and_wait` adds a ``WAIT`` on the same connection,
:func:`execute_pipelined` keeps two calls of one script in flight, and
:func:`drive` / :func:`adrive` run a multi-step flow
(:mod:`~django_rqueue.engine.flows`) step by step. A
script Redis lost (``NOSCRIPT``) is loaded and the call sent again;
redis-py's retries and the cluster client's redirections apply as for any
command. Connection problems are raised as
:class:`~django_rqueue.exceptions.RedisUnavailable`
(:func:`~.errors.redis_errors`); what the parser raises, as it raises it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Any, NamedTuple, cast

import redis
import redis.asyncio
from redis.exceptions import NoScriptError, RedisClusterException

from .commands import Command, Plain
from .connection import redis_errors, unavailable
from .flows import Flow
from .pipelining import pipelined
from .replies import Reply
from .scripts import load


def execute[T](
    client: redis.Redis, step: Command[T] | Plain[T], overlap: Callable[[], object] | None = None
) -> T:
    """Run ``step`` on ``client`` and return its parsed reply.

    ``overlap`` (a script call only): called once after the call is sent and
    before its reply is read, so that work that does not need the reply
    overlaps Redis's (``.delay()`` builds its Job then;
    :func:`~.dedicated.execute`).

    Raises:
        RedisUnavailable: Redis cannot be reached (or the queue's cluster slot is moving).
        redis.ResponseError: Redis refused the call (nothing written).
    """
    if isinstance(step, Plain):
        return _send_plain(client, cast("Plain[T]", step))
    call = step.call
    try:  # as redis_errors(client), without making a context manager on every call
        reply = load(call.script)(client, call.keys, call.args, overlap)
    except (redis.RedisError, RedisClusterException) as exc:
        found = unavailable(exc, client)
        if found is None:
            raise
        raise found from exc
    return step.parse(reply)


def _send_plain[T](client: redis.Redis, plain: Plain[T]) -> T:
    with redis_errors(client):
        if len(plain.commands) == 1:
            return plain.parse(client.execute_command(*plain.commands[0]))  # type: ignore[no-untyped-call]
        pipe = client.pipeline(transaction=plain.transaction)
        for command in plain.commands:
            pipe.execute_command(*command)  # type: ignore[no-untyped-call]
        return plain.parse(pipe.execute())


async def aexecute[T](client: redis.asyncio.Redis, step: Command[T] | Plain[T]) -> T:
    """:func:`execute` on an asyncio client (no overlap: the event loop overlaps)."""
    with redis_errors(client):
        if isinstance(step, Plain):
            plain = cast("Plain[T]", step)
            if len(plain.commands) == 1:
                return plain.parse(await client.execute_command(*plain.commands[0]))  # type: ignore[no-untyped-call]
            pipe = client.pipeline(transaction=plain.transaction)
            for command in plain.commands:
                pipe.execute_command(*command)
            return plain.parse(await pipe.execute())
        call = step.call
        return step.parse(await load(call.script).acall(client, call.keys, call.args))


class ReplicaWait(NamedTuple):
    """``WAIT <replicas> <timeout_ms>`` sent right after a write, on the write's connection."""

    replicas: int
    #: Milliseconds (> 0: Redis reads 0 as "wait forever").
    timeout_ms: int


def execute_and_wait[T](
    client: redis.Redis, command: Command[T], wait: ReplicaWait
) -> tuple[T, int]:
    """Run ``command``, then ``WAIT``, in one pipeline: ``(the parsed reply, replicas)``.

    ``WAIT`` counts the replicas that acknowledged every write made so far on
    *its own* connection (https://redis.io/docs/latest/commands/wait/), so the
    write and the ``WAIT`` go in one pipeline: one connection, one round trip.
    A ``NOSCRIPT`` reply (Redis lost its script cache) loads the script and
    sends both again. Raises what :func:`execute` raises.
    """
    call = command.call
    script = load(call.script)
    with redis_errors(client):
        for _attempt in range(2):
            pipe = client.pipeline(transaction=False)
            script.queue_in(pipe, call.keys, call.args)
            pipe.wait(wait.replicas, wait.timeout_ms)
            reply, acked = pipe.execute(raise_on_error=False)
            if not isinstance(reply, NoScriptError):
                break
            client.script_load(script.source)
    return _waited(command, reply, acked)


async def aexecute_and_wait[T](
    client: redis.asyncio.Redis, command: Command[T], wait: ReplicaWait
) -> tuple[T, int]:
    """:func:`execute_and_wait` on an asyncio client."""
    call = command.call
    script = load(call.script)
    with redis_errors(client):
        for _attempt in range(2):
            pipe = client.pipeline(transaction=False)
            pipe.evalsha(script.sha, len(call.keys), *call.keys, *call.args)
            pipe.wait(wait.replicas, wait.timeout_ms)
            reply, acked = await pipe.execute(raise_on_error=False)
            if not isinstance(reply, NoScriptError):
                break
            await client.script_load(script.source)
    return _waited(command, reply, acked)


def _waited[T](command: Command[T], reply: Reply | Exception, acked: Any) -> tuple[T, int]:
    for value in (reply, acked):
        if isinstance(value, Exception):
            raise value
    return command.parse(reply), int(acked)  # type: ignore[arg-type]  # not an Exception now


def execute_pipelined[T](client: redis.Redis, commands: Iterable[Command[T]]) -> Iterator[T]:
    """Run ``commands`` (calls of one script) in order, two in flight on one connection
    (:func:`~.pipelining.pipelined`), yielding each parsed reply as it is read.

    ``commands`` is consumed lazily: the next is built while Redis runs the one
    before. A call whose reply is lost is sent again through the client, so the
    script must be idempotent per call. Raises what :func:`execute` raises; the
    calls whose replies were yielded ran.
    """
    pending = iter(commands)
    first = next(pending, None)
    if first is None:
        return
    parsers: deque[Callable[[Reply], T]] = deque()

    def calls() -> Iterator[tuple[list[str], list[Any]]]:
        for command in chain((first,), pending):
            parsers.append(command.parse)
            yield command.call.keys, command.call.args

    with redis_errors(client):
        for reply in pipelined(client, load(first.call.script), calls()):
            yield parsers.popleft()(reply)


def drive[T](client: redis.Redis, flow: Flow[T]) -> T:
    """Run ``flow`` (:mod:`~django_rqueue.engine.flows`) on ``client``: each step it yields
    with :func:`execute`, its result sent back in; return what the flow returns.

    Raises what :func:`execute` raises for a step, and what the flow raises.
    """
    result: Any = None
    while True:
        try:
            step = flow.send(result)
        except StopIteration as done:
            return cast("T", done.value)
        result = execute(client, step)


async def adrive[T](client: redis.asyncio.Redis, flow: Flow[T]) -> T:
    """:func:`drive` on an asyncio client (each step with :func:`aexecute`)."""
    result: Any = None
    while True:
        try:
            step = flow.send(result)
        except StopIteration as done:
            return cast("T", done.value)
        result = await aexecute(client, step)
