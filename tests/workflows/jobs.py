"""The job functions the workflow tests compose (nothing here runs them)."""

from __future__ import annotations

from typing import Any

from django_rqueue import JobContext, job


@job
def fetch(url: str) -> str:
    return url


@job
def parse(text: str, strict: bool = False) -> list[str]:
    return text.split()


@job
def store(items: list[str]) -> int:
    return len(items)


@job
def noop() -> None:
    return None


@job
def summarize(results: list[Any]) -> int:
    return len(results)


@job(queue="emails")
def mail(to: str) -> None:
    return None


@job(takes_context=True)
def report(ctx: JobContext, results: list[Any], title: str) -> str:
    return title


@job
def anything(*args: Any, **kwargs: Any) -> None:
    return None


@job(unique_key="only-one")
def singleton() -> None:
    return None


@job
async def fetch_async(url: str) -> str:
    return url


@job
def add(left: int, right: int) -> int:
    return left + right


@job
def double(value: int) -> int:
    return value * 2


@job
def collect(values: list[Any], *extra: Any) -> list[Any]:
    """Returns what it was given (a run-policy node sees DependencyFailed as its repr)."""
    return [repr(v) if isinstance(v, Exception) else v for v in values] + list(extra)


@job(max_attempts=1)
def explode(value: Any = None) -> None:
    raise RuntimeError(f"boom {value!r}")


@job(takes_context=True)
def inputs_seen(ctx: JobContext, *args: Any) -> dict[str, Any]:
    """Returns its own arguments and its context's inputs, as JSON can carry them."""
    return {
        "args": [repr(v) if isinstance(v, Exception) else v for v in args],
        "inputs": [repr(v) if isinstance(v, Exception) else v for v in ctx.inputs],
        "workflow": ctx.workflow_id,
    }


@job
def note(*args: Any) -> list[Any]:
    """A callback: returns its arguments (the workflow id first unless .si())."""
    return list(args)


@job
async def triple_async(value: int) -> int:
    return value * 3
