"""A view for the tests of ``adelay()`` in async code (routed in ``tests/urls.py``)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from django_rqueue import aget_job

from .jobs import async_record


async def enqueue_async(request: HttpRequest) -> JsonResponse:
    """Enqueue ``async_record(ledger, tag)`` from the query string; answer its id and status
    as read back with ``aget_job``."""
    job = await async_record.adelay(request.GET["ledger"], request.GET["tag"])
    again = await aget_job(job.id)
    return JsonResponse({"id": job.id, "status": again.status if again else None})
