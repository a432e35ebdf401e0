"""The Lua scripts of the queue's state transitions, one file per transition.

Each ``<name>.lua`` here starts with a header listing its ``KEYS[i]`` and
``ARGV[i]``. Shared helpers live in ``include/`` and are pulled in by a line
``--@include <file>.lua`` (each file at most once per script; nested includes
are expanded in place), the way BullMQ composes its scripts; between ``--@scope`` and
``--@end-scope`` lines they are expanded for one function's body only
(``include/notify_dependents.lua``). Python sends a
script only through the executors of :mod:`django_rqueue.engine.run` (and the
pipelined sends of :mod:`django_rqueue.engine.pipelining`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from functools import cache
from importlib import resources

import redis
from redis.exceptions import NoScriptError

from ..dedicated import execute
from ..replies import Reply

_INCLUDE = re.compile(r"--@include (\S+\.lua)")
#: The lines around includes expanded for one function's body only (:func:`_expanded_lines`).
_SCOPE, _END_SCOPE = "--@scope", "--@end-scope"


def _read(path: str) -> str:
    return resources.files(__package__).joinpath(path).read_text(encoding="utf-8")


def _expand(source: str) -> str:
    return "\n".join(_expanded_lines(source, set()))


def _expanded_lines(source: str, seen: set[str]) -> Iterator[str]:
    """``source`` with each ``--@include`` replaced by its file, expanded the same way (each
    file once: ``seen`` holds those already expanded).

    Between ``--@scope`` and ``--@end-scope`` (inside a function's body) the files not
    expanded yet are expanded again for that scope only, so they stay local to the function
    and cost nothing until it is called: every ``local function`` a script runs through
    is a closure Redis makes on each run of the script.
    """
    outer: list[set[str]] = []
    for line in source.split("\n"):
        match = _INCLUDE.fullmatch(line)
        if match is not None:
            name = match.group(1)
            if name not in seen:
                seen.add(name)
                # Includes may include others (expanded in place, before their user).
                yield from _expanded_lines(_read(f"include/{name}"), seen)
            continue
        if line == _SCOPE:
            outer.append(seen)
            seen = set(seen)
        elif line == _END_SCOPE:
            seen = outer.pop()
        yield line


#: Times a call loads its script again while Redis keeps answering ``NOSCRIPT`` (it lost the
#: script again between the load and the call: restarted twice in a row, or ``SCRIPT FLUSH``).
RELOADS = 3


class LuaScript:
    """One transition script, called with ``EVALSHA`` (loaded on ``NOSCRIPT``).

    The SHA1 is computed once per process; a Redis that restarted or ran
    ``SCRIPT FLUSH`` gets the source again on a ``NOSCRIPT`` reply, up to
    :data:`RELOADS` times in one call.
    """

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()

    def __call__(
        self,
        client: redis.Redis,
        keys: list[str],
        args: list[str | int | float],
        meanwhile: Callable[[], object] | None = None,
    ) -> Reply:
        reply: Reply
        try:
            reply = execute(
                client, "EVALSHA", self.sha, len(keys), *keys, *args, meanwhile=meanwhile
            )
        except NoScriptError:
            reply = self._reloaded_call(client, keys, args)
        return reply

    def _reloaded_call(
        self, client: redis.Redis, keys: list[str], args: list[str | int | float]
    ) -> Reply:
        """Load the script and call it again, up to :data:`RELOADS` times while the call
        still finds it missing (a ``NOSCRIPT`` runs nothing, so calling again is safe)."""
        reply: Reply
        for _ in range(RELOADS - 1):
            client.script_load(self.source)
            try:
                reply = execute(client, "EVALSHA", self.sha, len(keys), *keys, *args)
            except NoScriptError:
                continue  # lost again before this call: Redis restarted again, SCRIPT FLUSH
            return reply
        client.script_load(self.source)
        reply = execute(client, "EVALSHA", self.sha, len(keys), *keys, *args)
        return reply

    async def acall(
        self, client: redis.asyncio.Redis, keys: list[str], args: list[str | int | float]
    ) -> Reply:
        """``__call__`` on an asyncio client."""
        reply: Reply
        try:
            reply = await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            for _ in range(RELOADS - 1):
                await client.script_load(self.source)
                try:
                    reply = await client.evalsha(self.sha, len(keys), *keys, *args)
                except NoScriptError:
                    continue  # lost again before this call (see _reloaded_call)
                return reply
            await client.script_load(self.source)
            reply = await client.evalsha(self.sha, len(keys), *keys, *args)
        return reply

    def queue_in(
        self, pipe: redis.client.Pipeline, keys: list[str], args: list[str | int | float]
    ) -> None:
        """Add a call to ``pipe`` (load the script first with :meth:`ensure_loaded`)."""
        pipe.evalsha(self.sha, len(keys), *keys, *args)

    def ensure_loaded(self, client: redis.Redis) -> None:
        """Load the script into ``client``'s server unless it has it already."""
        if not client.script_exists(self.sha)[0]:
            client.script_load(self.source)


@cache
def load(name: str) -> LuaScript:
    """Return the script ``<name>.lua`` with its includes expanded."""
    return LuaScript(name, _expand(_read(f"{name}.lua")))
