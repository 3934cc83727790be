#!/usr/bin/env bash
# Creates .venv and installs the project with its pinned dependencies. Idempotent: reinstalls
# only when a requirements file or pyproject.toml changed since the last run.
#   scripts/bootstrap.sh          runtime dependencies (what `cograph up` needs)
#   scripts/bootstrap.sh dev      plus test, lint and proto tooling
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
kind=${1:-runtime}
venv=${VENV:-$root/.venv}

pick_python() {
  for candidate in ${PYTHON:-} python3.11 python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "error: Python 3.11 or newer is required (set PYTHON=...)" >&2
  return 1
}

if [ ! -x "$venv/bin/python" ]; then
  py=$(pick_python)
  if ! "$py" -m venv "$venv" 2>/dev/null; then
    # Debian and Ubuntu ship venv separately.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
      rm -rf "$venv" && "$py" -m venv "$venv"
    else
      echo "error: '$py -m venv' failed; install python3-venv (sudo apt-get install python3-venv)" >&2
      exit 1
    fi
  fi
  "$venv/bin/python" -m pip install -q --upgrade pip
fi

# The console's browser test drives Debian's Chromium (no browser download at test time).
if [ "$kind" = dev ] && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing chromium for the console's browser test" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "warning: /usr/bin/chromium is missing; the browser test needs it (sudo apt-get install chromium)" >&2
  fi
fi

req=requirements.txt
[ "$kind" = dev ] && req=requirements-dev.txt
stamp="$venv/.installed-$kind"
digest=$(cat requirements.txt requirements-dev.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ]; then
  echo "installing $req into $venv (first run downloads ~1 GB; later runs are instant)" >&2
  # --no-compile: pip would byte-compile every installed file (torch alone has thousands
  # that are never imported), about half of the install's CPU; Python compiles and caches
  # what is imported on first use.
  "$venv/bin/python" -m pip install -q --no-compile -r "$req"
  "$venv/bin/python" -m pip install -q --no-deps -e .
  echo "$digest" > "$stamp"
fi
