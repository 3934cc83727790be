# The two commands the README promises: `make up` runs Cograph, `make test` tests it.
.PHONY: up test unit lint protos docs bench-embedder clean

VENV ?= .venv
PY := $(VENV)/bin/python

up:
	@scripts/bootstrap.sh runtime
	$(VENV)/bin/cograph up

# Two workers, a file each at a time (module fixtures stay in one process): the suite's
# waits on PostgreSQL, the embedder and subprocesses overlap on 2 cores.
test: lint
	$(PY) -m pytest -q -p no:cacheprovider --durations=15 -n 2 --dist loadfile --no-loadscope-reorder

# The inner loop: pure-logic tests only (no database, no model), in seconds. Without the
# hypothesis and schemathesis plugins, which only test_gateway_schemathesis.py uses and
# which take about 2 s of CPU to import.
unit:
	@scripts/bootstrap.sh dev
	$(PY) -m pytest -q -p no:cacheprovider -p no:schemathesis -p no:hypothesispytest tests/unit

# mypy's incremental cache lives outside the checkout, so a fresh clone on the same machine
# re-checks only what changed (about 110 s of CPU cold, 3 s warm). mypy validates every
# cached module against its source's hash, so a stale entry is re-checked, never trusted.
MYPY_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/cograph/mypy

lint:
	@scripts/bootstrap.sh dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --cache-dir "$(MYPY_CACHE)"
	$(VENV)/bin/buf lint
	$(VENV)/bin/buf format -d --exit-code
	BUF=$(VENV)/bin/buf scripts/buf_breaking.sh

protos:
	@scripts/bootstrap.sh dev
	scripts/gen_protos.sh

# docs/configuration.md from the settings code (tests/unit/test_config_docs.py checks it).
docs:
	@scripts/bootstrap.sh dev
	$(PY) -m scripts.config_docs

bench-embedder:
	@scripts/bootstrap.sh dev
	$(PY) -m bench.embedder

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
