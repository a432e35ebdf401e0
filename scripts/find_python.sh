#!/usr/bin/env bash
# Print the path of a Python interpreter >= 3.12 that can create virtualenvs.
#
# Usage: scripts/find_python.sh [PREFERRED_MINOR]   e.g. scripts/find_python.sh 3.13
#
# Candidates, in order: python3.13, python3.12, python3 on PATH, then
# $PYENV_ROOT/versions/3.1[2-9]*/bin/python3 newest first (PYENV_ROOT defaults
# to ~/.pyenv; /root/.pyenv is also tried). pyenv shims that are not activated
# fail to run, so every candidate is actually executed. With PREFERRED_MINOR, the first
# candidate of exactly that version wins; otherwise (or if none matches) the
# first candidate >= 3.12 wins. Exits 1 with a message on stderr if none works.
set -euo pipefail

preferred="${1:-}"

candidates=()
for name in python3.13 python3.12 python3; do
    if path="$(command -v "$name" 2>/dev/null)"; then
        candidates+=("$path")
    fi
done
# pyenv installs, newest first (like the names above), so a plain call and
# `find_python.sh 3.13` agree and .venv is not rebuilt back and forth.
shopt -s nullglob
pyenv_pythons=()
for root in "${PYENV_ROOT:-$HOME/.pyenv}" /root/.pyenv; do
    pyenv_pythons+=("$root"/versions/3.1[2-9]*/bin/python3)
done
shopt -u nullglob
if [[ ${#pyenv_pythons[@]} -gt 0 ]]; then
    mapfile -t pyenv_pythons < <(printf '%s\n' "${pyenv_pythons[@]}" | sort -u -r -V)
    candidates+=("${pyenv_pythons[@]}")
fi

probe='import sys, venv, ensurepip
print("%d.%d" % sys.version_info[:2])
sys.exit(0 if sys.version_info >= (3, 12) else 1)'

first_ok=""
tried=()
for cand in "${candidates[@]}"; do
    tried+=("$cand")
    if ver="$("$cand" -c "$probe" 2>/dev/null </dev/null)"; then
        real="$("$cand" -c 'import sys; print(sys.executable)' 2>/dev/null </dev/null)"
        if [[ -n "$preferred" && "$ver" == "$preferred" ]]; then
            echo "$real"
            exit 0
        fi
        [[ -z "$first_ok" ]] && first_ok="$real"
        [[ -z "$preferred" ]] && break
    fi
done

if [[ -n "$first_ok" ]]; then
    echo "$first_ok"
    exit 0
fi

{
    echo "error: no Python >= 3.12 (with venv + ensurepip) found."
    echo "  tried: ${tried[*]:-<no candidates>}"
    echo "  install one (e.g. 'pyenv install 3.13') or pass an interpreter explicitly."
} >&2
exit 1
