"""Sphinx configuration of the django-rqueue documentation (``scripts/docs.sh`` builds it).

The site is Markdown (MyST) with the Furo theme. The API pages are read from the code
(autodoc), so Django is set up first, with the small settings of :mod:`docs_settings`.

Intersphinx needs the inventories of Python, Django and redis-py, which are downloaded
while the site builds; CI has no internet, so they are used only when
``RQUEUE_DOCS_INTERSPHINX=1``. Without them, a reference to those projects is shown as
code without a link, never as a warning (:mod:`offline_refs`), and every reference into
django-rqueue itself is still checked by ``-n``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import django

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "docs_settings")
django.setup()

project = "django-rqueue"
author = "django-rqueue contributors"
copyright = "django-rqueue contributors"  # noqa: A001 - the name Sphinx reads

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "sphinx.ext.napoleon",
    "attribute_docs",
    "offline_refs",
    "short_refs",
    "rqueue_reference",
]

source_suffix = {".md": "markdown"}
# reference/_generated/: the pages rqueue_reference writes, included by those beside it.
exclude_patterns = ["_build", "reference/_generated", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# The pages quote code (`--queue`, 'high,low'): no typographic dashes and quotes.
smartquotes = False

html_theme = "furo"
html_title = "django-rqueue"

add_module_names = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# arguments and signature_check: what the worker and enqueue call on a job function, not API.
autodoc_default_options = {"members": True, "exclude-members": "arguments, signature_check"}

napoleon_numpy_docstring = False
# The type parameters of the generic classes and functions (``Job[R]``, ``JobFunction[P, R]``,
# the engine's ``Command[T]`` and ``Flow[T]``) and the private helpers their signatures name
# have no page of their own.
nitpick_ignore = [("py:class", n) for n in ("P", "P.args", "P.kwargs", "R", "T")]
# django-stubs' type of a lazy translated string (``gettext_lazy``), which the admin's
# annotations name: it exists only in the stubs, so no inventory has it.
nitpick_ignore.append(("py:class", "_StrPromise"))
nitpick_ignore_regex = [("py:class", r"django_rqueue(\.\w+)*\._\w+")]

#: Used only with ``RQUEUE_DOCS_INTERSPHINX=1`` (they are downloaded); see the module docstring.
INVENTORIES = {
    "python": ("https://docs.python.org/3", None),
    "django": (
        "https://docs.djangoproject.com/en/stable/",
        "https://docs.djangoproject.com/en/stable/_objects/",
    ),
    "redis": ("https://redis.readthedocs.io/en/stable/", None),
}
intersphinx_online = os.environ.get("RQUEUE_DOCS_INTERSPHINX") == "1"
intersphinx_mapping = INVENTORIES if intersphinx_online else {}
