"""One command for the whole bench: ``python bench/run.py [--smoke] [--runs N] [--only a,b]``.

1. Creates ``bench/.venv-peers`` (gitignored) with django-rqueue's own
   dependencies (editable install of this checkout, with hiredis) and, one
   pip call each so that one failure does not hide the others, the peers:
   rq, celery[redis], dramatiq[redis], huey, arq. A peer whose install fails
   is skipped and the reason printed. Re-installs only when this file's
   requirement list or pyproject.toml changes (or ``--reinstall``).
2. Re-executes ``bench/harness.py`` with that venv's Python: a fresh private
   redis-server (``--save '' --appendonly no``), every system measured in the
   same run, one table printed, JSON written to ``bench/results-<mode>.json``.

Needs only a Python >= 3.12 with ``venv`` and a ``redis-server`` on PATH.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / "bench" / ".venv-peers"
PY = VENV / "bin" / "python"
STAMP = VENV / ".bench-stamp.json"

BASE = ["-e", f"{REPO}[hiredis]", "pyinstrument", "psutil"]
#: system name (as in bench/systems) -> pip requirements
PEERS = {
    "RQ (SimpleWorker)": ["rq>=2"],
    "Celery (prefork)": ["celery[redis]>=5.4"],
    "Dramatiq (2 threads/proc)": ["dramatiq[redis]>=1.17"],
    "Huey": ["huey>=2.5"],
    "arq": ["arq>=0.25"],
}


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PY), "-m", "pip", "install", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def bootstrap(reinstall: bool) -> dict[str, str]:
    """Create/refresh the venv; return {system: reason} for peers that could not be installed."""
    # pyproject.toml too: a dependency django-rqueue gains must reach this venv.
    project = (REPO / "pyproject.toml").read_text()
    wanted = hashlib.sha256(json.dumps([BASE, PEERS, project]).encode()).hexdigest()
    if STAMP.exists() and not reinstall:
        stamp = json.loads(STAMP.read_text())
        if stamp.get("hash") == wanted:
            skipped: dict[str, str] = stamp["skipped"]
            return skipped
    if reinstall and VENV.exists():
        shutil.rmtree(VENV)
    if not PY.exists():
        print(f"creating {VENV}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    print("installing django-rqueue (editable) + hiredis into the bench venv", flush=True)
    base = pip(*BASE)
    if base.returncode != 0:
        sys.exit(f"pip install of django-rqueue failed:\n{base.stdout}{base.stderr}")
    # Every system must run on the same redis-py: pin what django-rqueue got, so
    # that pip picks peer versions that accept it (instead of a later peer
    # silently downgrading redis-py under the earlier ones).
    freeze = subprocess.run(
        [str(PY), "-m", "pip", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    pins = [ln for ln in freeze.splitlines() if ln.lower().startswith(("redis==", "hiredis=="))]
    constraints = VENV / "constraints.txt"
    constraints.write_text("\n".join(pins) + "\n")
    skipped = {}
    for name, reqs in PEERS.items():
        print(f"installing {' '.join(reqs)} (with {', '.join(pins)})", flush=True)
        result = pip("-c", str(constraints), *reqs)
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            skipped[name] = "pip install failed: " + " / ".join(tail)
            print(f"  skipped {name}: {skipped[name]}", flush=True)
    STAMP.write_text(json.dumps({"hash": wanted, "skipped": skipped}))
    return skipped


def main() -> None:
    args = sys.argv[1:]
    reinstall = "--reinstall" in args
    args = [a for a in args if a != "--reinstall"]
    if sys.version_info < (3, 12):  # noqa: UP036 - run.py may be started by any python3
        sys.exit("bench/run.py needs Python >= 3.12 (the venv is made from this interpreter)")
    skipped = bootstrap(reinstall)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    argv = [str(PY), "-m", "bench.harness", *args, "--skipped", json.dumps(skipped)]
    os.chdir(REPO)
    os.execve(str(PY), argv, env)


if __name__ == "__main__":
    main()
