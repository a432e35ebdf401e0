"""Every page's examples run as tests (``pytest docs/``): the rules are in
:mod:`tests.support.docs_pages`."""

from __future__ import annotations

from pathlib import Path

from tests.support.docs_pages import docs_database, docs_page, docs_redis_server, sybil

__all__ = ["docs_database", "docs_page", "docs_redis_server"]

pytest_collect_file = sybil(Path(__file__).resolve().parent).pytest()
