#!/usr/bin/env bash
# Make sure redis-server (and redis-cli) are on PATH: install Debian's
# redis-server package with apt-get when they are missing (as root, or through
# a password-less sudo). Never starts or uses the system service: the demo and
# the tests launch private redis-server processes.
#
# Usage: scripts/ensure_redis.sh
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

if ! command -v redis-server >/dev/null 2>&1; then
    echo "redis-server not found; installing the Debian package" >&2
    if [[ "$(id -u)" -eq 0 ]]; then
        sudo_cmd=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo_cmd=(sudo -n)
    else
        echo "error: redis-server is missing and we are not root" \
            "(install it with: apt-get install redis-server, or brew install redis)" >&2
        exit 1
    fi
    "${sudo_cmd[@]}" apt-get update -qq </dev/null
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends redis-server </dev/null >/dev/null
    command -v redis-server >/dev/null 2>&1 || {
        echo "error: redis-server still not on PATH after apt-get install" >&2
        exit 1
    }
fi
echo "redis-server: $(redis-server --version | awk '{print $3}')"
