# Two entry points: `make demo` (set up, ingest the sample data, search and answer a question) and `make test`.
# `make check` is the inner loop: lint and the fast tier (durations: docs/operations.md, "Tests").
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch is installed first and separately so that machines with a local CPU build (like ours) use it;
# elsewhere set TORCH to what suits you, e.g. TORCH="torch --index-url https://download.pytorch.org/whl/cpu".
TORCH ?= torch==2.13.0
QUESTION ?= How do I open Free Transform?

.PHONY: setup demo dev check test lint clean

# Quiet unless V=1: pip's own warnings and setuptools' "Editable installation" banner (a Python warning in the build
# backend, which inherits PYTHONWARNINGS) say nothing a user can act on; errors still show.
PIP_QUIET := $(if $(V),,-qq)
QUIET_ENV := $(if $(V),,PYTHONWARNINGS=ignore)
VERBOSE := $(if $(V),-v,)

# What the demo, `pstuts` and `make dev` need: the project without extras.
$(BIN)/pstuts: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(QUIET_ENV) $(BIN)/pip install $(PIP_QUIET) --upgrade pip
	$(QUIET_ENV) $(BIN)/pip install $(PIP_QUIET) $(TORCH)
	$(QUIET_ENV) $(BIN)/pip install $(PIP_QUIET) -c constraints.txt -e .
	@# `source .venv/bin/activate` then points dg and dagster at the project's instance (telemetry off), not ~/.dagster.
	grep -q DAGSTER_HOME $(BIN)/activate || echo "export DAGSTER_HOME=\"$$($(BIN)/python -c \
		'from pstuts_pipeline.defs.instance import prepare_home; print(prepare_home())')\"" >> $(BIN)/activate
	touch $@

# Every extra, for the tests and the servers they start: pytest and Playwright (dev), PostgreSQL (postgres), the
# local chat server (chat), Celery workers (celery).
$(VENV)/.extras: $(BIN)/pstuts
	$(QUIET_ENV) $(BIN)/pip install $(PIP_QUIET) -c constraints.txt -e '.[dev,postgres,chat,celery]'
	touch $@

setup: $(VENV)/.extras

demo: $(BIN)/pstuts
	$(BIN)/pstuts $(VERBOSE) ingest
	$(BIN)/pstuts $(VERBOSE) search "$(QUESTION)" --top-k 3
	$(BIN)/pstuts $(VERBOSE) ask "$(QUESTION)"

# The UI, the folder sensor and the schedules, on the project's instance (.storage/dagster_home unless DAGSTER_HOME).
dev: $(BIN)/pstuts
	$(BIN)/pstuts dev

# The fast tier: no real model, no Dagster subprocesses, no servers (pytest -m "not slow").
check: lint
	$(BIN)/pytest -m "not slow" -n 2

# The whole suite: the fast tier first (a broken build fails in minutes), then the slow tier on two pytest-xdist
# workers, one test file each (a file's module-scoped servers and ingests stay in one process; most of its tests wait
# on subprocesses, so two workers beat one on two cores), listing its 15 slowest tests at the end.
test: check
	$(BIN)/pytest -m slow -n 2 --dist loadfile --durations=15

# ruff (rules in pyproject.toml): lint, and the formatting check; `ruff format .` rewrites. Then the import contracts
# (import-linter) and the package's types (mypy; a first run reads the libraries' types, later ones use .mypy_cache).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

clean:
	rm -rf .storage
