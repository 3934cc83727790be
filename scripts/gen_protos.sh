#!/usr/bin/env bash
# Regenerates gen/python from protos/. Run after editing a .proto; tests fail when the
# committed output is stale (tests/unit/test_generated_fresh.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/gen/python}
py=${PYTHON:-$root/.venv/bin/python}
bin=$(dirname "$py")
rm -rf "$out/cograph"
mkdir -p "$out"
mapfile -t protos < <(cd "$root/protos" && find cograph -name '*.proto' | LC_ALL=C sort)
(cd "$root/protos" && PATH="$bin:$PATH" "$py" -m grpc_tools.protoc -I . \
  --python_out="$out" --grpc_python_out="$out" \
  --mypy_out="$out" --mypy_grpc_out="$out" "${protos[@]}")
# Packages need __init__.py so setuptools and mypy see them as regular packages.
find "$out/cograph" -type d -exec sh -c 'for d; do touch "$d/__init__.py"; done' _ {} +
# The contracts' comments, which protoc leaves out of the modules, for the gateway's OpenAPI.
"$py" "$root/scripts/proto_docs.py" "$root/protos" "$out/cograph/proto_docs.py"
