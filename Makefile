# The two commands: `make demo` and `make test`. Both do all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export TOPICMAP_HOME ?= $(CURDIR)/.topicmap

# The Dagster instance `make ui` and `make demo` use: `local` (default: SQLite under DAGSTER_HOME) or `postgres`
# (deploy/dagster.yaml: needs DAGSTER_PG_HOST, DAGSTER_PG_PORT, DAGSTER_PG_DB, DAGSTER_PG_USERNAME and
# DAGSTER_PG_PASSWORD, e.g. `make ui TOPICMAP_INSTANCE=postgres`). Both have the same run queue, limits,
# run monitoring and retries; each gets its own DAGSTER_HOME unless you set one.
TOPICMAP_INSTANCE ?= local
ifeq ($(TOPICMAP_INSTANCE),postgres)
export DAGSTER_HOME ?= $(TOPICMAP_HOME)/dagster_home_postgres
INSTANCE_TEMPLATE := deploy/dagster.yaml
else ifeq ($(TOPICMAP_INSTANCE),local)
export DAGSTER_HOME ?= $(TOPICMAP_HOME)/dagster_home
INSTANCE_TEMPLATE := deploy/dagster.local.yaml
else
$(error TOPICMAP_INSTANCE must be local or postgres, not "$(TOPICMAP_INSTANCE)")
endif
PG_VARS := DAGSTER_PG_HOST DAGSTER_PG_PORT DAGSTER_PG_DB DAGSTER_PG_USERNAME DAGSTER_PG_PASSWORD
MANAGED := \# topicmap-managed

.PHONY: demo test test-fast ui demo-ui lint bench clean venv instance

# The versions tested, not the newest pyproject allows: constraints.txt pins every package the install brings.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# $(DAGSTER_HOME)/dagster.yaml from the template, refreshed on every call; a file you wrote yourself (without
# the first line below) is kept as it is. The demo's old one-line file (telemetry only) counts as ours.
instance:
	@mkdir -p $(DAGSTER_HOME)
	@if [ "$(TOPICMAP_INSTANCE)" = postgres ]; then for v in $(PG_VARS); do \
	  printenv $$v >/dev/null || { echo "TOPICMAP_INSTANCE=postgres needs $$v (see deploy/README.md)"; exit 1; }; done; fi
	@f=$(DAGSTER_HOME)/dagster.yaml; \
	if [ ! -f $$f ] || head -n 1 $$f | grep -q '^$(MANAGED)' || [ "$$(cat $$f)" = "$$(printf 'telemetry:\n  enabled: false')" ]; then \
	  { echo "$(MANAGED): copied from $(INSTANCE_TEMPLATE) by make; edit the template, or drop this line to keep your own"; \
	    cat $(INSTANCE_TEMPLATE); } > $$f.tmp && mv $$f.tmp $$f && echo "Dagster instance: $$f (from $(INSTANCE_TEMPLATE))"; \
	else echo "Dagster instance: keeping $$f (not written by make)"; fi

demo: $(STAMP) instance
	$(BIN)/python -m orchestration.demo

# Test workers, each given whole test modules (module fixtures are built once), the slow modules first
# (tests/conftest.py). Four on two cores: the end-to-end modules spend much of their time waiting on daemons, run
# queues and politeness intervals, and the other workers fill that time; three left the cores idler, five cost more
# CPU than they filled (docs/testing.md; `make test TEST_WORKERS=2` for two).
TEST_WORKERS ?= 4
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -q
# Bytecode written even where the environment says not to (PYTHONDONTWRITEBYTECODE): pytest keeps each test module
# it has rewritten for its assertions in __pycache__ only then, and every worker otherwise rewrites all ~220 of them
# again (collection 14 CPU s a worker instead of 8).
test test-fast: export PYTHONDONTWRITEBYTECODE :=

# every test
test: lint
	mkdir -p $(DAGSTER_HOME)
	$(PYTEST)

# the unit and component tests, between two changes: not those that start a daemon, a browser or processes of their
# own (markers daemon, browser and deployment in pyproject.toml); PostgreSQL, RabbitMQ and Redis tests included
test-fast: lint
	mkdir -p $(DAGSTER_HOME)
	$(PYTEST) -m "not daemon and not browser and not deployment"

# The UI's port (`make ui DAGSTER_PORT=3300`)
DAGSTER_PORT ?= 3000

# webserver + daemon (`dagster dev`) on the instance above, stopped whole by SIGTERM or SIGINT (`topicmap ui`);
# production runs them apart (deploy/README.md)
ui: $(STAMP) instance
	$(BIN)/topicmap ui -p $(DAGSTER_PORT)

# The UI on the demo's instance with the demo's settings: the demo web and the Bit.ly/Facebook stand-ins are
# served for as long as it runs, so runs launched from the UI (a click_totals backfill, a re-execution) work.
demo-ui: $(STAMP) instance
	$(BIN)/topicmap demo-ui -p $(DAGSTER_PORT)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) $(TOPICMAP_HOME)
