#!/usr/bin/env bash
# Run the whole django-rqueue test recipe from a fresh machine.
#
# Usage: ./scripts/test.sh [PYTEST_ARGS...]
#
#   1. bootstrap .venv       (Python 3.13 if present, Django 6.1.x, the docs tools)
#   2. ruff check + ruff format --check
#   3. mypy (strict, config in pyproject.toml)
#   4. manage.py check + makemigrations --check (with tests.settings)
#   5. the documentation site (scripts/docs.sh: sphinx-build -n -W --keep-going)
#   6. pytest                 (Django 6.1 / Python 3.13)
#      + the worker tests again as the README's least-privilege Redis user
#        (RQUEUE_TEST_ACL=1, ~1 minute)
#   7. bootstrap .venv-dj60  (Python 3.12 if present, Django 6.0.x, the docs tools) + pytest
#   8. bootstrap .venv-dj52  (Python 3.12 if present, Django 5.2.x LTS with the
#      django-tasks backport, the "tasks" extra) + pytest
#
# Env:
#   RQUEUE_TEST_QUICK=1   run only steps 1-6 (the first matrix cell)
#   RQUEUE_FORCE_INSTALL=1  re-run pip even if nothing changed
#   RQUEUE_TEST_PROCESSES=N  pytest processes per cell (pytest-xdist; default 2,
#                            0 runs the tests in the pytest process itself)
# Extra arguments are passed to every pytest run, e.g. ./scripts/test.sh -k lease -x
# Every step runs even if an earlier one failed; the exit code is non-zero if
# any failed (pytest's "no tests collected", exit 5, counts as a failure).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

export PYTHONDONTWRITEBYTECODE=1 PIP_NO_INPUT=1
quick="${RQUEUE_TEST_QUICK:-0}"
artifacts="$repo_root/artifacts"
mkdir -p "$artifacts"

section() { printf '\n=== [%s] %s ===\n' "$(date -u +%H:%M:%S)" "$*"; }

failed=()
run_step() {  # run_step NAME CMD...: run, record failure, never abort
    local name="$1"
    shift
    local rc=0
    "$@" || rc=$?
    if [[ $rc -ne 0 ]]; then
        echo "--- FAILED: $name (exit $rc)"
        failed+=("$name (exit $rc)")
    fi
}

existing() {  # print those of the given paths that exist
    local p
    for p in "$@"; do [[ -e "$p" ]] && printf '%s\n' "$p"; done
    return 0
}

run_pytest() {  # run_pytest VENV CELL_NAME [ARGS...]
    local venv="$1" cell="$2"
    shift 2
    # The suite mostly waits (on workers, leases, timeouts), so two processes
    # halve its wall time; --dist loadfile keeps a module's tests together.
    "$venv/bin/python" -m pytest -n "${RQUEUE_TEST_PROCESSES:-2}" --dist loadfile \
        --junitxml="$artifacts/junit-$cell.xml" --durations=10 "$@"
}

as_acl_user() {  # as_acl_user CMD...: run CMD with RQUEUE_TEST_ACL=1 (functions too)
    (
        export RQUEUE_TEST_ACL=1
        "$@"
    )
}

# --- cell 1: Python 3.13 (if present) + Django 6.1 ---------------------------
section "bootstrap .venv (Django 6.1)"
py_main="$(scripts/find_python.sh 3.13)"
bash scripts/bootstrap.sh .venv '>=6.1,<6.2' "$py_main" dev,hiredis,docs

section "ruff"
run_step "ruff check" .venv/bin/ruff check .
run_step "ruff format" .venv/bin/ruff format --check .

section "mypy"
mapfile -t mypy_targets < <(existing django_rqueue example_project tests scripts docs)
run_step "mypy" .venv/bin/mypy "${mypy_targets[@]}"

section "django check / makemigrations --check"
run_step "django check" env DJANGO_SETTINGS_MODULE=tests.settings \
    .venv/bin/python -m django check --fail-level WARNING
run_step "makemigrations --check" env DJANGO_SETTINGS_MODULE=tests.settings \
    .venv/bin/python -m django makemigrations --check --dry-run

# Every reference resolves and no page warns; a broken docstring reference fails here.
section "docs (scripts/docs.sh)"
run_step "docs" bash scripts/docs.sh

section "pytest: Django 6.1 / $(.venv/bin/python -V)"
run_step "pytest dj61" run_pytest .venv dj61 "$@"

# The README's ACL line is what django-rqueue needs: workers (sync, async, several
# servers, a cluster) and Job.wait run as that user, and a test fails if Redis refused
# it anything (tests/support/redis_acl.py).
section "pytest: worker tests as the least-privilege Redis user (RQUEUE_TEST_ACL=1)"
run_step "pytest dj61 acl" as_acl_user run_pytest .venv dj61-acl \
    tests/worker tests/master tests/faults/test_several_servers.py tests/faults/test_async_jobs.py \
    tests/faults/test_idle_pickup.py tests/faults/test_redis_cluster.py \
    tests/test_job_wait.py tests/engine/test_permissions.py tests/workflows/test_worker_process.py \
    tests/faults/test_workflows_kills.py tests/faults/test_workflows_redis.py \
    tests/workflows/test_interrupted.py "$@"

# --- cells 2 and 3: Python 3.12 (if present) + Django 6.0, then Django 5.2 ----
if [[ "$quick" == "1" ]]; then
    section "RQUEUE_TEST_QUICK=1: skipping the Django 6.0 and 5.2 cells"
else
    py_second="$(scripts/find_python.sh 3.12)"

    section "bootstrap .venv-dj60 (Django 6.0)"
    bash scripts/bootstrap.sh .venv-dj60 '>=6.0,<6.1' "$py_second" dev,hiredis,docs

    section "pytest: Django 6.0 / $(.venv-dj60/bin/python -V)"
    run_step "pytest dj60" run_pytest .venv-dj60 dj60 "$@"

    section "bootstrap .venv-dj52 (Django 5.2 LTS + the django-tasks backport)"
    bash scripts/bootstrap.sh .venv-dj52 '>=5.2,<6.0' "$py_second" dev,hiredis,tasks,docs

    section "pytest: Django 5.2 / $(.venv-dj52/bin/python -V)"
    run_step "pytest dj52" run_pytest .venv-dj52 dj52 "$@"
fi

section "summary"
if [[ ${#failed[@]} -gt 0 ]]; then
    printf 'FAILED steps:\n'
    printf '  - %s\n' "${failed[@]}"
    exit 1
fi
echo "all steps passed"
