#!/usr/bin/env bash
# Create/refresh a virtualenv with django-rqueue (editable) + dev tools.
#
# Usage: scripts/bootstrap.sh VENV_DIR DJANGO_SPEC [PYTHON [EXTRAS]]
#   e.g. scripts/bootstrap.sh .venv '>=6.1,<6.2'
#        scripts/bootstrap.sh .venv-dj60 '>=6.0,<6.1' /usr/bin/python3.12
#        scripts/bootstrap.sh .venv-dj52 '>=5.2,<6.0' "" dev,hiredis,tasks
# EXTRAS: the package's extras to install (default dev,hiredis; Django 5.2
# needs tasks too, the django.tasks backport). PYTHON "" means: find one.
#
# Idempotent: installs redis-server via apt if it is missing (never starts or
# uses the system service: tests launch private redis-server processes), finds
# a Python >= 3.12 unless PYTHON is given, creates VENV_DIR if missing (or if
# its interpreter is broken / older than 3.12), and runs pip only when
# pyproject.toml, DJANGO_SPEC, EXTRAS or the interpreter changed since the last run
# (set RQUEUE_FORCE_INSTALL=1 to force).
set -euo pipefail

if [[ $# -lt 2 || $# -gt 4 ]]; then
    echo "usage: $0 VENV_DIR DJANGO_SPEC [PYTHON [EXTRAS]]" >&2
    exit 2
fi
venv="$1"
django_spec="$2"
python_arg="${3:-}"
extras="${4:-dev,hiredis}"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

log() { printf 'bootstrap: %s\n' "$*"; }

export DEBIAN_FRONTEND=noninteractive PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# --- redis-server ---------------------------------------------------------
bash "$repo_root/scripts/ensure_redis.sh" | sed 's/^/bootstrap: /'

# --- chromium (the admin's browser test; Playwright drives the Debian build) ---
if [[ ! -x /usr/bin/chromium ]]; then
    log "/usr/bin/chromium not found; installing the Debian package"
    if [[ "$(id -u)" -eq 0 ]]; then
        apt-get update -qq </dev/null
        apt-get install -y -qq chromium </dev/null >/dev/null
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo -n apt-get update -qq </dev/null
        sudo -n apt-get install -y -qq chromium </dev/null >/dev/null
    else  # the browser test then skips (or fails when CI is set)
        log "warning: not root; install chromium with: apt-get install chromium"
    fi
fi

# --- python + venv ----------------------------------------------------------
if [[ -n "$python_arg" ]]; then
    python="$python_arg"
    if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' \
        </dev/null 2>/dev/null; then
        echo "bootstrap: error: '$python' is not a working Python >= 3.12" >&2
        exit 1
    fi
else
    python="$("$repo_root/scripts/find_python.sh" 3.13)"
fi
python="$("$python" -c 'import sys; print(sys.executable)')"
want_ver="$("$python" -c 'import platform; print(platform.python_version())')"

vpy="$venv/bin/python"
if [[ -x "$vpy" ]]; then
    have_ver="$("$vpy" -c 'import platform; print(platform.python_version())' 2>/dev/null || true)"
    if [[ "$have_ver" != "$want_ver" ]]; then
        log "recreating $venv (has Python '${have_ver:-broken}', want $want_ver)"
        rm -rf "$venv"
    fi
fi
if [[ ! -x "$vpy" ]]; then
    log "creating $venv with $python ($want_ver)"
    "$python" -m venv "$venv"
fi

# --- pip install (skipped when nothing relevant changed) -----------------------
stamp="$venv/.rqueue-bootstrap-stamp"
fingerprint="$({
    echo "python=$want_ver"
    echo "django_spec=$django_spec"
    echo "extras=$extras"
    sha256sum pyproject.toml
} | sha256sum | cut -d' ' -f1)"

if [[ "${RQUEUE_FORCE_INSTALL:-0}" != "1" && -f "$stamp" && "$(cat "$stamp")" == "$fingerprint" ]] \
    && "$vpy" -c 'import django_rqueue, django, pytest' 2>/dev/null; then
    log "$venv is up to date (pyproject.toml and Django spec unchanged)"
else
    rm -f "$stamp"
    log "pip install -e '.[$extras]' 'Django$django_spec' into $venv"
    # Keep pip quiet; drop the machine's "Location 'file:///…' is ignored" noise
    # (pip.conf points at local indexes that may not exist), show all on failure.
    if ! pip_out="$("$vpy" -m pip install -q -e ".[$extras]" "Django$django_spec" </dev/null 2>&1)"; then
        printf '%s\n' "$pip_out" >&2
        echo "bootstrap: error: pip install failed" >&2
        exit 1
    fi
    printf '%s\n' "$pip_out" | grep -v "is ignored: it is neither a file nor a directory" | grep -v '^$' || true
    echo "$fingerprint" >"$stamp"
fi

"$vpy" - <<'PY'
import importlib.metadata as md
import platform
import sys

names = ["Django", "django-tasks", "redis", "django-redis", "hiredis", "pytest", "pytest-django", "ruff", "mypy", "django-stubs"]
versions = []
for name in names:
    try:
        versions.append(f"{name}={md.version(name)}")
    except md.PackageNotFoundError:
        versions.append(f"{name}=<missing>")
print(f"bootstrap: python={sys.executable} ({platform.python_version()})")
print("bootstrap: " + " ".join(versions))
PY
