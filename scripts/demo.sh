#!/usr/bin/env bash
# Run the django-rqueue demo end to end on this machine.
#
# Usage: ./scripts/demo.sh [--smoke]
#
#   1. create .venv-demo (Python >= 3.12) with what the demo needs and nothing
#      else: pip install -e '.[hiredis,webhooks]' (Django, redis-py, httpx)
#   2. start a private redis-server on a free port, unless REDIS_URL is set
#      (Debian's redis-server is installed with apt-get when it is missing)
#   3. migrate the example site, start it (runserver) and a worker (rqueue_work)
#   4. submit the password-reset form over HTTP, wait for the job, show the
#      worker's log lines and the email file it wrote
#   5. queue 8,9,4,5,2 report jobs for users a,b,c,d,e, run them with a burst
#      worker and print the round-robin order they ran in
#   6. queue a flaky job (fails twice, then succeeds) and a job that always
#      fails, and show both via get_job
#   7. an async view queues an async job (adelay) that fetches a page of the
#      site with httpx; the worker runs it on its event loop
#   8. enqueue a django.tasks task (TASKS uses RQueueBackend) and wait for its
#      result with get_result
#
# Then the site, the worker and Redis keep running, and the admin's address
# and login are printed: open it, retry or delete the failed job; Ctrl-C stops
# everything (exit 0).
#
# --smoke: print less, check every expectation and stop at the end (what CI
# runs). Either way the script exits non-zero if a step fails, every wait is
# bounded, and every process it started is stopped on exit. Logs, the SQLite
# database and the emails are written to artifacts/demo/ (emptied at each run).
#
# Env: REDIS_URL     use this Redis instead of a private one (keys get a fresh
#                    per-run prefix, RQUEUE_KEY_PREFIX, so runs never collide);
#                    without it, redis-server is installed with apt-get if missing
#      RQUEUE_DEMO_VENV  a virtualenv to use as it is, instead of .venv-demo
#                    (it must have django-rqueue and httpx, e.g. the tests' .venv)
#      RQUEUE_DEMO_WORK  where to write instead of artifacts/demo/
set -euo pipefail

smoke=0
for arg in "$@"; do
    case "$arg" in
    --smoke) smoke=1 ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "usage: $0 [--smoke]" >&2
        exit 2
        ;;
    esac
done

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

work="${RQUEUE_DEMO_WORK:-$repo_root/artifacts/demo}"
expected_rounds="A B C D E / A B C D E / A B C D / A B C D / A B D / A B / A B / A B / B"

say() { printf '\n==> %s\n' "$*"; }
info() { if [[ $smoke -eq 0 ]]; then printf '%s\n' "$*"; fi; }
die() {
    printf 'demo: FAILED: %s\n' "$*" >&2
    exit 1
}

# --- cleanup: stop everything we started -------------------------------------
pids=()
serving=0 # 1 once every step passed and normal mode waits for Ctrl-C
cleanup() {
    local rc=$? pid i
    trap - EXIT
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        pid="${pids[i]}"
        kill -TERM "$pid" 2>/dev/null || continue
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [[ $rc -ne 0 ]]; then
        local log
        for log in "$work"/*.log; do
            [[ -f "$log" ]] || continue
            printf '\n--- last lines of %s ---\n' "${log#"$repo_root"/}" >&2
            tail -n 20 "$log" >&2
        done
        printf '\ndemo: failed (exit %d); logs in %s\n' "$rc" "${work#"$repo_root"/}" >&2
    elif [[ $serving -eq 1 ]]; then
        printf 'demo: stopped the site, the worker and Redis\n'
    fi
    exit "$rc"
}
trap cleanup EXIT
# Ctrl-C while the finished demo serves is how it is meant to end: exit 0.
trap 'if [[ $serving -eq 1 ]]; then exit 0; else exit 130; fi' INT
trap 'if [[ $serving -eq 1 ]]; then exit 0; else exit 143; fi' TERM

# wait_for SECONDS WHAT CMD...: run CMD until it succeeds, at most SECONDS.
wait_for() {
    local seconds="$1" what="$2"
    shift 2
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            die "$what not ready after ${seconds} s"
        fi
        sleep 0.1
    done
}

rm -rf "$work"
mkdir -p "$work"

# --- 1. virtualenv ------------------------------------------------------------
if [[ -n "${RQUEUE_DEMO_VENV:-}" ]]; then
    venv="$RQUEUE_DEMO_VENV"
    say "use the virtualenv $venv as it is"
else
    venv=.venv-demo
    say "virtualenv $venv: pip install -e '.[hiredis,webhooks]'"
    install_demo_venv() {
        local python stamp fingerprint
        python="$(scripts/find_python.sh 3.13)"
        [[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
        stamp="$venv/.rqueue-demo-stamp"
        fingerprint="$(sha256sum pyproject.toml | cut -d' ' -f1)"
        if [[ -f "$stamp" && "$(cat "$stamp")" == "$fingerprint" ]]; then
            echo "$venv is up to date"
            return 0
        fi
        rm -f "$stamp"
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
            "$venv/bin/python" -m pip install -q -e '.[hiredis,webhooks]' </dev/null || return 1
        echo "$fingerprint" >"$stamp"
        echo "installed into $venv"
    }
    install_demo_venv >"$work/install.log" 2>&1 || {
        cat "$work/install.log" >&2
        die "pip install into $venv"
    }
    grep -v "is ignored: it is neither a file nor a directory" "$work/install.log" | tail -n 1
fi
py="$repo_root/$venv/bin/python"
[[ "$venv" == /* ]] && py="$venv/bin/python"
"$py" -c 'import django_rqueue, httpx, redis' 2>/dev/null \
    || die "$venv lacks django-rqueue, httpx or redis (pip install -e '.[hiredis,webhooks]')"
manage() { "$py" example_project/manage.py "$@"; }
free_port() {
    "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

export DJANGO_SETTINGS_MODULE=example_project.settings
export PYTHONUNBUFFERED=1
export EMAIL_FILE_PATH="$work/sent_emails"
export DEMO_DB_PATH="$work/db.sqlite3"

# --- 2. Redis -----------------------------------------------------------------
if [[ -z "${REDIS_URL:-}" ]]; then
    bash scripts/ensure_redis.sh >"$work/redis-install.log" 2>&1 || {
        cat "$work/redis-install.log" >&2
        die "redis-server is missing (or set REDIS_URL)"
    }
    redis_port="$(free_port)"
    say "start a private redis-server on 127.0.0.1:$redis_port"
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$work" --logfile "$work/redis.log" &
    pids+=($!)
    export REDIS_URL="redis://127.0.0.1:$redis_port/0"
else
    export RQUEUE_KEY_PREFIX="${RQUEUE_KEY_PREFIX:-rqueue-demo-$(date +%s)-$$}"
    say "use REDIS_URL=$REDIS_URL (key prefix $RQUEUE_KEY_PREFIX)"
fi
wait_for 10 "Redis at $REDIS_URL" \
    "$py" -c 'import sys, redis; redis.Redis.from_url(sys.argv[1]).ping()' "$REDIS_URL"

# --- 3. site + worker -----------------------------------------------------------
say "migrate, start the example site and a worker"
manage migrate --noinput -v 0
# A staff superuser for the admin's Rqueue pages (printed at the end).
admin_user=admin
admin_password=demo-admin-pass
DJANGO_SUPERUSER_PASSWORD="$admin_password" manage createsuperuser --noinput \
    --username "$admin_user" --email admin@example.com >/dev/null
site_port="$(free_port)"
base="http://127.0.0.1:$site_port"
# (Not through the manage() function: $! must be python's pid, not a subshell's.)
"$py" example_project/manage.py runserver "127.0.0.1:$site_port" --noreload \
    >"$work/site.log" 2>&1 &
pids+=($!)
# Reports are left to a burst worker below, so that all 28 are queued first.
"$py" example_project/manage.py rqueue_work --queues emails,default --async-concurrency 10 \
    >"$work/worker.log" 2>&1 &
pids+=($!)
wait_for 30 "the example site at $base" \
    "$py" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
    "$base/password-reset/"
wait_for 30 "the worker" grep -q "serving" "$work/worker.log"
info "site:   $base/password-reset/   (log: ${work#"$repo_root"/}/site.log)"
info "worker: $(grep -m1 serving "$work/worker.log")"

# --- 4. password reset over HTTP --------------------------------------------------
say "forgotten password: submit the reset form over HTTP, the worker sends the email"
manage demo_submit_reset "$base" alice@example.com --timeout 30 | tee "$work/http.txt"
email_job="$(grep -m1 -oE 'emails:[A-Za-z0-9_-]{22}' "$work/http.txt")" || die "no job id in the answer"

say "worker log lines for $email_job"
grep -F "$email_job" "$work/worker.log" || die "the worker did not log $email_job"

say "the email the worker wrote"
shopt -s nullglob
emails=("$EMAIL_FILE_PATH"/*)
shopt -u nullglob
[[ ${#emails[@]} -eq 1 ]] || die "expected 1 email file in $EMAIL_FILE_PATH, found ${#emails[@]}"
echo "${emails[0]#"$repo_root"/}:"
if [[ $smoke -eq 1 ]]; then
    grep -E '^(To|Subject):' "${emails[0]}"
else
    sed 's/^/    /' "${emails[0]}"
fi
grep -q '^To: alice@example.com' "${emails[0]}" || die "the email is not addressed to alice"
# The job returns the link it mailed (the file wraps it: quoted-printable).
link="$(grep -m1 -oE '"result": "http://[^"]+"' "$work/http.txt" | cut -d'"' -f4)" \
    || die "the job returned no reset link"
"$py" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' "$link" \
    || die "the reset link $link does not open"
info "the reset link opens: $link"

# --- 5. fair round-robin between users --------------------------------------------
say "round-robin reports: users a,b,c,d,e queue 8,9,4,5,2 jobs, same priority; they take turns"
manage demo_enqueue reports >"$work/report-ids.txt"
echo "queued $(wc -l <"$work/report-ids.txt") jobs on queue 'reports' (no worker serves it yet)"
say "run them: rqueue_work --burst --queues reports --concurrency 1"
timeout 60 "$py" example_project/manage.py rqueue_work --burst --queues reports --without-poller --concurrency 1 \
    >"$work/reports-worker.log" 2>&1 || die "the burst worker failed or timed out"
if [[ $smoke -eq 0 ]]; then
    grep -m3 'outcome=' "$work/reports-worker.log"
    echo "... ($(grep -c 'outcome=succeeded' "$work/reports-worker.log") succeeded in all)"
fi
manage demo_report_order --expect "$expected_rounds"
echo "expected:     $expected_rounds"

# --- 6. retries and the failed store -------------------------------------------------
say "a flaky job (fails twice, then succeeds) and a job that always fails"
flaky_job="$(manage demo_enqueue flaky)"
failing_job="$(manage demo_enqueue always_fails)"
manage demo_wait "$flaky_job" --expect succeeded --timeout 30
manage demo_wait "$failing_job" --expect failed --timeout 30
info "worker log lines:"
grep -E "$flaky_job|$failing_job" "$work/worker.log" || die "the worker did not log them"
say "get_job() of both"
manage demo_show "$flaky_job" "$failing_job" --traceback-lines 3 | tee "$work/show.txt"
grep -q 'status=succeeded  attempts=3/3' "$work/show.txt" || die "flaky: expected succeeded after 3 attempts"
grep -q 'status=failed  attempts=2/2' "$work/show.txt" || die "always_fails: expected failed after 2 attempts"
[[ "$(grep -c 'error of attempt' "$work/show.txt")" -eq 4 ]] || die "expected 2 + 2 recorded errors"

say "the failed store: manage.py rqueue_failed list, and the same in the admin"
manage rqueue_failed list --queue default
echo "in the admin: $base/admin/django_rqueue/dashboard/jobs/$failing_job/   (retry or delete it there)"
"$py" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' \
    "$base/admin/login/" || die "the admin login page does not open"

# --- 7. an async job ------------------------------------------------------------------
say "an async view queues an async job (adelay) that fetches a page of this site with httpx"
check_answer="$("$py" -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
    "$base/check-site/")" || die "the async view $base/check-site/ failed"
echo "GET /check-site/ -> $check_answer"
check_job="$(grep -m1 -oE 'default:[A-Za-z0-9_-]{22}' <<<"$check_answer")" || die "no job id in the answer"
manage demo_wait "$check_job" --expect succeeded --timeout 30
grep -F "$check_job" "$work/worker.log" || die "the worker did not log $check_job"
manage demo_show "$check_job" | tee "$work/check.txt"
grep -q "'status': 200" "$work/check.txt" || die "the async job did not get the page (HTTP 200)"

# --- 8. a django.tasks task -----------------------------------------------------------
say "a django.tasks task (TASKS: django_rqueue.backends.RQueueBackend) on queue 'emails'"
task_id="$(manage demo_enqueue welcome_task)"
manage demo_task_result "$task_id" --expect SUCCESSFUL --timeout 30 | tee "$work/task.txt"
grep -q "return_value='Welcome to the django-rqueue demo'" "$work/task.txt" \
    || die "the task did not return its subject"
grep -F "$task_id" "$work/worker.log" || die "the worker did not log $task_id"

say "demo finished: all steps passed (logs in ${work#"$repo_root"/}/)"
if [[ $smoke -eq 1 ]]; then
    exit 0
fi
serving=1
printf '\nThe site, the worker and Redis keep running. Open the admin:\n'
printf '    %s/admin/django_rqueue/dashboard/    login: %s / %s\n' "$base" "$admin_user" "$admin_password"
printf 'Press Ctrl-C to stop them.\n'
# Until Ctrl-C (the INT trap exits 0), or until one of them stops by itself.
wait -n "${pids[@]}" || true
serving=0
die "a process of the demo (redis-server, the site or the worker) stopped by itself"
