# The two commands: `make demo` and `make test`. Both do all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export TOPICMAP_HOME ?= $(CURDIR)/.topicmap
export DAGSTER_HOME ?= $(TOPICMAP_HOME)/dagster_home

.PHONY: demo test ui demo-ui lint bench clean venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	mkdir -p $(DAGSTER_HOME)
	$(BIN)/python -m orchestration.demo

test: $(STAMP)
	mkdir -p $(DAGSTER_HOME)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n 2 --dist loadfile -q

ui: $(STAMP)
	mkdir -p $(DAGSTER_HOME)
	$(BIN)/dagster dev -w workspace.yaml

# The UI on the demo's instance with the demo's settings: the demo web and the Bit.ly/Facebook stand-ins are
# served for as long as it runs, so runs launched from the UI (a click_totals backfill, a re-execution) work.
demo-ui: $(STAMP)
	mkdir -p $(DAGSTER_HOME)
	$(BIN)/topicmap demo-ui

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) $(TOPICMAP_HOME)
