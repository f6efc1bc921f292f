# Two entry points: `make demo` (set up, ingest the sample data, search and answer a question) and `make test`.
# `make check` is the inner loop: lint and the fast tier, about a minute.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch is installed first and separately so that machines with a local CPU build (like ours) use it;
# elsewhere set TORCH to what suits you, e.g. TORCH="torch --index-url https://download.pytorch.org/whl/cpu".
TORCH ?= torch==2.13.0
QUESTION ?= How do I open Free Transform?

.PHONY: setup demo dev check test lint clean

$(BIN)/pstuts: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,postgres,chat]'
	touch $@

setup: $(BIN)/pstuts

demo: setup
	$(BIN)/pstuts ingest
	$(BIN)/pstuts search "$(QUESTION)" --top-k 3
	$(BIN)/pstuts ask "$(QUESTION)"

# The UI, the folder sensor and the schedules, on the project's instance (.storage/dagster_home unless DAGSTER_HOME).
dev: setup
	$(BIN)/pstuts dev

# The fast tier: no real model, no Dagster subprocesses, no servers (pytest -m "not slow").
check: lint
	$(BIN)/pytest -m "not slow" -n 2

# The whole suite: the fast tier first (a broken build fails in minutes), then the slow tier in one process (its
# tests start servers, Dagster processes and kill ingests; a run of it on two xdist workers lost its controller).
test: check
	$(BIN)/pytest -m slow

# ruff (rules in pyproject.toml): lint, and the formatting check; `ruff format .` rewrites.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf .storage
