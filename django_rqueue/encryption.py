"""Encryption at rest of job arguments, results and errors: ``RQUEUE["ENCRYPTION_KEYS"]``.

With the setting (a list of Fernet keys, ``cryptography.fernet.Fernet.generate_key()``)
every job's arguments (the payload), its result and each error record are encrypted in
Python before they are written to Redis, with ``cryptography``'s ``MultiFernet``: the
first key encrypts, every key decrypts, so a key is rotated by putting a new one first
and dropping the old one once no record needs it. Fernet is AES-128-CBC with an
HMAC-SHA256 over the token (the Fernet spec, github.com/fernet/spec): a record altered
in Redis does not decrypt. The job's name, queue, state, options and timestamps stay
plain: the Lua scripts need them. Errors the Lua scripts write themselves (a lost
lease's, which carry no job data) stay plain too.

An encrypted value is :data:`PREFIX` followed by the Fernet token (URL-safe base64).
Readers tell encrypted values from plain JSON (which never starts with ``f``) by that
prefix, so records written before the keys were set still read, and a value in a
record is decrypted whatever the setting says now. A value no configured key decrypts
(or one found while no keys are set) is reported in the job's ``problems``
(:func:`open_fields`): the worker then fails that job with that message, and the
admin and ``rqueue_failed`` show it; nothing crashes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured

from .conf import get_config
from .engine.fields import JobFields
from .serialization import join_payload

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

#: What an encrypted value starts with (then a Fernet token).
PREFIX = "fernet:"
_PREFIX_BYTES = PREFIX.encode()

#: The message of a value that cannot be decrypted with the configured keys.
MISSING_KEY = (
    "its {what} are encrypted with a key that is not in RQUEUE['ENCRYPTION_KEYS'] "
    "(add the key that encrypted them back to the list, after the current one)"
)
#: The message of an encrypted value found while ``RQUEUE["ENCRYPTION_KEYS"]`` is not set.
NO_KEYS = (
    "its {what} are encrypted but RQUEUE['ENCRYPTION_KEYS'] is not set "
    "(set it to the keys that encrypted them)"
)


@functools.lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    try:
        from cryptography.fernet import Fernet, MultiFernet
    except ImportError as exc:  # pragma: no cover - the check E112 reports it first
        raise ImproperlyConfigured(
            "rqueue.E112: RQUEUE['ENCRYPTION_KEYS'] needs the cryptography package: "
            "pip install 'django-rqueue[encryption]'"
        ) from exc
    return MultiFernet([Fernet(key) for key in keys])


def current() -> MultiFernet | None:
    """The ``MultiFernet`` of ``RQUEUE["ENCRYPTION_KEYS"]`` (read now), or ``None`` when unset.

    Raises:
        django.core.exceptions.ImproperlyConfigured: keys are set but ``cryptography`` is
            not installed (check ``rqueue.E112``; :func:`~django_rqueue.conf.get_config`
            raises it first).
    """
    keys = get_config().encryption_keys
    return _fernet(keys) if keys else None


def seal(text: str) -> str:
    """``text`` encrypted with the current key (:data:`PREFIX` + a Fernet token), or
    ``text`` itself when ``RQUEUE["ENCRYPTION_KEYS"]`` is not set.

    Called on the JSON of a job's arguments, result or error record just before it
    is written to Redis.

    Raises:
        django.core.exceptions.ImproperlyConfigured: keys are set but ``cryptography`` is
            not installed (check ``rqueue.E112``; :func:`~django_rqueue.conf.get_config`
            raises it first).
    """
    fernet = current()
    if fernet is None:
        return text
    return PREFIX + fernet.encrypt(text.encode()).decode("ascii")


def sealed(value: bytes | str | None) -> bool:
    """Whether ``value`` (as read from Redis) is an encrypted value."""
    if isinstance(value, bytes):
        return value.startswith(_PREFIX_BYTES)
    return value is not None and value.startswith(PREFIX)


def unseal(value: bytes | str) -> bytes:
    """The plaintext of an encrypted ``value`` (:func:`sealed`), as UTF-8 bytes.

    Raises:
        ValueError: no configured key decrypts it, or no keys are set; the message
            says which (with ``{what}`` left for the caller to fill in).
        django.core.exceptions.ImproperlyConfigured: keys are set but ``cryptography`` is
            not installed (check ``rqueue.E112``; :func:`~django_rqueue.conf.get_config`
            raises it first).
    """
    fernet = current()
    if fernet is None:
        raise ValueError(NO_KEYS)
    from cryptography.fernet import InvalidToken

    token = value[len(PREFIX) :]
    try:
        return fernet.decrypt(token)
    except InvalidToken:
        raise ValueError(MISSING_KEY) from None


def _unreadable_error(why: str) -> str:
    """What stands for an error record that cannot be decrypted (read as a plain one)."""
    return json.dumps({"type": "", "message": f"(unreadable: {why})", "traceback": ""})


def open_fields(fields: dict[str, bytes | str], problems: list[str]) -> dict[str, bytes | str]:
    """The job hash ``fields`` (``HGETALL``, field names as text) with its encrypted values
    decrypted; ``fields`` itself when none is encrypted (the common case costs a few
    prefix checks).

    The payload's parts (``p``, ``p:2``, ...) are joined and decrypted into ``p``. A
    value that cannot be decrypted is replaced by a harmless plain one: no arguments
    or no result, with the reason appended to ``problems`` (once per kind; a worker
    then fails the job with it rather than run it without its arguments), or, for an
    error record, one whose message says it is unreadable and why (not a problem: a
    past attempt's error does not stop the job from running). Never raises for a
    value no key decrypts.
    """
    errors = JobFields.ERROR in fields or JobFields.ERROR_COUNT in fields
    if not (
        sealed(fields.get(JobFields.PAYLOAD)) or sealed(fields.get(JobFields.RESULT)) or errors
    ):
        return fields
    opened: dict[str, bytes | str] = dict(fields)
    if sealed(opened.get(JobFields.PAYLOAD)):
        whole = join_payload(opened)
        part = 2
        while opened.pop(JobFields.payload_part(part), None) is not None:
            part += 1
        opened[JobFields.PAYLOAD] = _open(whole, "arguments", "[]", problems)
    if sealed(opened.get(JobFields.RESULT)):
        opened[JobFields.RESULT] = _open(opened[JobFields.RESULT], "result", "null", problems)
    if errors:
        names: Sequence[str] = [
            name for name in opened if name == JobFields.ERROR or name.startswith("err:")
        ]
        for name in names:
            value = opened[name]
            if sealed(value):
                opened[name] = _open(value, "errors", None, None)
    return opened


def _open(
    value: bytes | str, what: str, fallback: str | None, problems: list[str] | None
) -> bytes | str:
    try:
        return unseal(value)
    except ValueError as exc:
        why = str(exc).format(what=what)
        if problems is not None and why not in problems:
            problems.append(why)
        return _unreadable_error(why) if fallback is None else fallback
