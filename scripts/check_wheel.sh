#!/usr/bin/env bash
# Build the sdist and the wheel, check what the wheel holds, install it into a
# fresh virtualenv and run a job with it, so that a file missing from the
# package (a Lua script, a template, a migration, py.typed) fails CI.
#
# Usage: scripts/check_wheel.sh [PYTHON]
#   PYTHON: an interpreter with `build` installed (the dev extra has it);
#           default: .venv's, made or refreshed by scripts/bootstrap.sh.
#
#   1. python -m build --outdir artifacts/wheel-check/dist (the sdist, then
#      the wheel built from the sdist, as pip would from PyPI)
#   2. every file git tracks under django_rqueue/ is in the wheel (every
#      engine/scripts/*.lua and include/*.lua, the templates, py.typed, the
#      migrations), and each of those kinds is there at all
#   3. a fresh virtualenv with the wheel installed (not editable), run from a
#      temporary directory so nothing is imported from this checkout
#   4. a private redis-server on a free port, a tiny Django project (settings,
#      an app with a @job), migrate, check, .delay(), rqueue_work --burst, then
#      get_job() reads the result back; every template of the package loads
#      and the admin's dashboard renders for a superuser
# Writes to artifacts/wheel-check/ (rebuilt on every run); stops what it started.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

export PYTHONDONTWRITEBYTECODE=1 PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1

say() { printf 'check_wheel: %s\n' "$*"; }
die() {
    printf 'check_wheel: error: %s\n' "$*" >&2
    exit 1
}

if [[ $# -gt 1 ]]; then
    echo "usage: $0 [PYTHON]" >&2
    exit 2
fi
if [[ $# -eq 1 ]]; then
    build_python="$1"
else
    bash scripts/bootstrap.sh .venv '>=6.1,<6.2' "$(scripts/find_python.sh 3.13)"
    build_python="$repo_root/.venv/bin/python"
fi
"$build_python" -c 'import build' 2>/dev/null \
    || die "$build_python has no 'build' (pip install -e '.[dev]')"

work="$repo_root/artifacts/wheel-check"
rm -rf "$work"
mkdir -p "$work"

redis_pid=""
cleanup() {
    if [[ -n "$redis_pid" ]]; then
        kill -TERM "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT

# --- 1. build -------------------------------------------------------------------
say "python -m build (sdist, then the wheel from it)"
"$build_python" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || {
    cat "$work/build.log" >&2
    die "python -m build failed"
}
shopt -s nullglob
wheels=("$work"/dist/*.whl)
sdists=("$work"/dist/*.tar.gz)
shopt -u nullglob
[[ ${#wheels[@]} -eq 1 && ${#sdists[@]} -eq 1 ]] \
    || die "expected one wheel and one sdist in $work/dist"
wheel="${wheels[0]}"
say "built $(basename "${sdists[0]}") and $(basename "$wheel")"

# --- 2. what the wheel holds ------------------------------------------------------
git ls-files -- django_rqueue >"$work/tracked.txt"
"$build_python" - "$wheel" "$work/tracked.txt" <<'PY'
import sys
import zipfile
from pathlib import PurePosixPath

wheel, tracked_list = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    held = set(archive.namelist())
with open(tracked_list, encoding="utf-8") as f:
    tracked = [line.strip() for line in f if line.strip()]

missing = sorted(name for name in tracked if name not in held)
kinds = {  # kind: (the folder that holds it, or a folder above it; the name's suffix)
    "Lua scripts": ("django_rqueue/engine/scripts", ".lua"),
    "Lua includes": ("django_rqueue/engine/scripts/include", ".lua"),
    "templates": ("django_rqueue/templates/", ".html"),
    "migrations": ("django_rqueue/migrations", ".py"),
    "py.typed": ("django_rqueue", "py.typed"),
}


def is_kind(name: str, folder: str, suffix: str) -> bool:
    path = PurePosixPath(name)
    if not path.name.endswith(suffix) or path.name == "__init__.py":
        return False
    if folder.endswith("/"):  # anywhere below the folder
        return name.startswith(folder)
    return str(path.parent) == folder


counts = {kind: sum(is_kind(name, *where) for name in held) for kind, where in kinds.items()}
empty = [kind for kind, count in counts.items() if count == 0]
if missing or empty:
    for name in missing:
        print(f"check_wheel: missing from the wheel: {name}", file=sys.stderr)
    for kind in empty:
        print(f"check_wheel: the wheel holds no {kind}", file=sys.stderr)
    sys.exit(1)
summary = ", ".join(f"{count} {kind}" for kind, count in counts.items())
print(f"check_wheel: the wheel holds all {len(tracked)} tracked package files ({summary})")
PY
git ls-files -- 'django_rqueue/templates/*.html' | sed 's|^django_rqueue/templates/||' \
    >"$work/templates.txt"

# --- 3. a fresh virtualenv with the wheel ---------------------------------------
venv_python="$(scripts/find_python.sh 3.13)"
say "fresh virtualenv with $venv_python; pip install $(basename "$wheel")"
"$venv_python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$wheel" </dev/null >"$work/install.log" 2>&1 || {
    cat "$work/install.log" >&2
    die "pip install of the wheel failed"
}
py="$work/venv/bin/python"

# --- 4. a job run by the installed package ------------------------------------
bash scripts/ensure_redis.sh | sed 's/^/check_wheel: /'
redis_port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$work" >"$work/redis.log" 2>&1 &
redis_pid=$!
export RQUEUE_SMOKE_REDIS_URL="redis://127.0.0.1:$redis_port/0"
redis_ping() { "$py" -c 'import sys, redis; redis.Redis.from_url(sys.argv[1]).ping()' "$1"; }
for _ in $(seq 100); do
    redis_ping "$RQUEUE_SMOKE_REDIS_URL" >/dev/null 2>&1 && break
    kill -0 "$redis_pid" 2>/dev/null || die "redis-server stopped: $(cat "$work/redis.log")"
    sleep 0.1
done
redis_ping "$RQUEUE_SMOKE_REDIS_URL" >/dev/null 2>&1 || die "redis-server did not answer in 10 s"
say "private redis-server at $RQUEUE_SMOKE_REDIS_URL"

project="$work/project"
mkdir -p "$project/smokeapp"
touch "$project/smokeapp/__init__.py"
cat >"$project/smokeapp/jobs.py" <<'PY'
from django_rqueue import job


@job(max_attempts=1)
def add(a: int, b: int) -> int:
    return a + b
PY
cat >"$project/settings.py" <<'PY'
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "wheel-smoke-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_rqueue",
    "smokeapp",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"}}
STATIC_URL = "static/"
USE_TZ = True
RQUEUE = {"REDIS_URL": os.environ["RQUEUE_SMOKE_REDIS_URL"]}
PY
cat >"$project/urls.py" <<'PY'
from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
PY
cat >"$project/manage.py" <<'PY'
import os
import sys

from django.core.management import execute_from_command_line

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
execute_from_command_line(sys.argv)
PY
cat >"$project/smoke.py" <<'PY'
"""The smoke job: `smoke.py enqueue` prints a job id, `smoke.py check ID TEMPLATES` checks it."""

import os
import sys
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
import django

django.setup()

import django_rqueue
from django.contrib.auth.models import User
from django.template.loader import get_template
from django.test import Client

from django_rqueue import JobStatus, get_job
from smokeapp.jobs import add

venv = Path(sys.prefix).resolve()
if not Path(django_rqueue.__file__).resolve().is_relative_to(venv):
    sys.exit(f"django_rqueue imported from {django_rqueue.__file__}, not from {venv}")

if sys.argv[1] == "enqueue":
    print(add.delay(2, 3).id)
    sys.exit(0)

job = get_job(sys.argv[2])
if job is None or job.status != JobStatus.SUCCEEDED or job.result != 5:
    sys.exit(f"the smoke job did not succeed with 5: {job and (job.status, job.result, job.error)}")
print(f"check_wheel: {job.id} {job.status}, result {job.result} read back with get_job()")

names = Path(sys.argv[3]).read_text(encoding="utf-8").split()
for name in names:
    get_template(name)
print(f"check_wheel: the installed package's {len(names)} templates load")

client = Client()
client.force_login(User.objects.create_superuser("smoke", "smoke@example.invalid", "smoke"))
response = client.get("/admin/django_rqueue/dashboard/", follow=True)
if response.status_code != 200 or b"default" not in response.content:
    sys.exit(f"the admin dashboard answered {response.status_code}")
print("check_wheel: the admin dashboard renders")
PY

# The project's directory is the only one on sys.path: nothing comes from this checkout.
cd "$project"
unset PYTHONPATH DJANGO_SETTINGS_MODULE
"$py" manage.py check >"$work/check.log" 2>&1 || {
    cat "$work/check.log" >&2
    die "manage.py check failed"
}
"$py" manage.py migrate -v 0 || die "manage.py migrate failed"
job_id="$("$py" smoke.py enqueue)" || die "the smoke job could not be enqueued"
say "enqueued $job_id; rqueue_work --burst"
timeout 120 "$py" manage.py rqueue_work --burst --concurrency 1 >"$work/worker.log" 2>&1 || {
    cat "$work/worker.log" >&2
    die "rqueue_work --burst failed"
}
"$py" smoke.py check "$job_id" "$work/templates.txt" || die "the smoke job's checks failed (logs in $work)"
say "ok"
