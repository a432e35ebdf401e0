#!/usr/bin/env bash
# Build the documentation site into docs/_build/html, as CI does (scripts/test.sh).
#
# Usage: scripts/docs.sh [--serve [PORT]]
#   --serve   then serve the site on http://127.0.0.1:PORT/ (default 8000) until Ctrl-C
#
# The build is nitpicky and strict (sphinx-build -n -W --keep-going): a reference that
# does not resolve, or any other warning, fails it. References to Python, Django and
# redis-py are linked only with RQUEUE_DOCS_INTERSPHINX=1 (their inventories are then
# downloaded; see docs/conf.py). Installs the docs extra into .venv when it is missing
# (and creates .venv with scripts/bootstrap.sh when there is none).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

serve=0
port=8000
if [[ $# -gt 0 ]]; then
    if [[ "$1" != "--serve" || $# -gt 2 ]]; then
        echo "usage: $0 [--serve [PORT]]" >&2
        exit 2
    fi
    serve=1
    port="${2:-8000}"
fi

export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
if [[ ! -x .venv/bin/python ]]; then
    bash scripts/bootstrap.sh .venv '>=6.1,<6.2' "" dev,hiredis,docs
elif ! .venv/bin/python -c 'import sphinx, myst_parser, furo' 2>/dev/null; then
    echo "docs: installing the docs extra into .venv"
    .venv/bin/python -m pip install -q -e '.[docs]'
fi

# --fresh-env: every page is read again, so every warning is shown on every build.
.venv/bin/sphinx-build -n -W --keep-going --fresh-env -q docs docs/_build/html
echo "docs: built docs/_build/html/index.html"

if [[ "$serve" == "1" ]]; then
    echo "docs: serving http://127.0.0.1:$port/ (Ctrl-C to stop)"
    exec .venv/bin/python -m http.server "$port" --bind 127.0.0.1 --directory docs/_build/html
fi
