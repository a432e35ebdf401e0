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
