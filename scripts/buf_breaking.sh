#!/usr/bin/env bash
# `buf breaking` for `make lint`: the working tree's protos against the commit they grew from.
#
# The baseline is the merge-base with main (origin/main, else main) when HEAD is ahead of it,
# as on a branch; else HEAD~1, as in CI on main, where the newest commit is the one to check.
# BUF_BREAKING_AGAINST (any buf input, e.g. '.git#ref=v0.1.0') overrides the choice. Without
# a baseline (no git, a shallow clone of one commit, the first commit) there is nothing to
# compare with: it says so and succeeds.
set -euo pipefail
cd "$(dirname "$0")/.."
buf="${BUF:-.venv/bin/buf}"

against="${BUF_BREAKING_AGAINST:-}"
if [ -z "$against" ]; then
    if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        echo "buf breaking: not a git checkout; skipped"
        exit 0
    fi
    head="$(git rev-parse HEAD)"
    base=""
    for main in origin/main main; do
        if git rev-parse -q --verify "$main^{commit}" >/dev/null; then
            fork="$(git merge-base HEAD "$main" 2>/dev/null || true)"
            if [ -n "$fork" ] && [ "$fork" != "$head" ]; then
                base="$fork"
                break
            fi
        fi
    done
    if [ -z "$base" ]; then
        base="$(git rev-parse -q --verify 'HEAD~1^{commit}' || true)"
    fi
    if [ -z "$base" ]; then
        echo "buf breaking: no earlier commit to compare with (first commit or shallow clone); skipped"
        exit 0
    fi
    against=".git#ref=$base"
fi
echo "buf breaking --against '$against'"
"$buf" breaking --against "$against"
