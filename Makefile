# Partitionlet: set-up, run, lint and test.
#
#   make run     set everything up, then start the web console on a demo (three clusters)
#   make test    set everything up for tests, then lint and run the whole pytest suite
#
# Set-up is idempotent: the virtual environment lives in .venv, and stamp files in it
# record what was installed, so pip runs again only when pyproject.toml is newer than
# its stamp, and npm only when package.json or package-lock.json is newer than its stamp.
# Quix Streams and Faust, which tests run as applications, each have a virtual environment
# of their own: .venv-quix and .venv-faust.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
VPY := $(BIN)/python
# the packages that ruff checks and formats
LINT_PATHS := engine console web spark_tasks bench tests
# extra arguments for pytest, e.g. make test PYTEST_ARGS="-x -k layout"
PYTEST_ARGS ?=
# pytest-xdist worker processes of make test (1 runs the suite in one process). Three on
# two cores: many tests wait on other processes (Spark, browsers, servers, clients), and a
# fresh clone's suite took 545 s with three against 662 s with two (quiet), 765 s beside
# two busy loops (1,055 s with two); docs/BENCHMARKS.md, "Suite time".
TEST_WORKERS ?= 3
# where make run puts its demo: the clusters dc1, dc2 and dc3 in this directory
DEMO_CLUSTER ?= data/demo
# the web console's address (make run WEB_PORT=8080; WEB_HOST=0.0.0.0 to reach it from elsewhere)
WEB_HOST ?= 127.0.0.1
WEB_PORT ?= 5000

PIP_INSTALL := $(VPY) -m pip install --disable-pip-version-check $(if $(CI),--progress-bar off,)

# the stamps: what has been installed into .venv, and when
STAMP_RUN := $(VENV)/.stamp-run
STAMP_TEST := $(VENV)/.stamp-test
STAMP_NPM := node_modules/.stamp-npm
# Quix Streams, which tests/engine/wire/test_quixstreams.py runs against plet serve, has a
# virtual environment of its own: it pins confluent-kafka below the version in .venv
QUIX_VENV := .venv-quix
QUIX_VERSION := 3.28.1
STAMP_QUIX := $(QUIX_VENV)/.stamp-quix-$(QUIX_VERSION)
# Faust (faust-streaming), which tests/engine/wire/test_faust.py runs against plet serve,
# too: it pins click below the version Flask brings into .venv
FAUST_VENV := .venv-faust
FAUST_VERSION := 0.15.3
STAMP_FAUST := $(FAUST_VENV)/.stamp-faust-$(FAUST_VERSION)

.DEFAULT_GOAL := help
.PHONY: help run test lint fmt setup setup-test system-run system-test web-assets clean distclean

help:
	@echo "make run         set up (.venv, Spark extra, Java, web assets), then seed a demo in $(DEMO_CLUSTER)"
	@echo "                 and serve its web console: plet web --demo --cluster $(DEMO_CLUSTER)"
	@echo "make test        set up for tests (+ Java, Chromium, redis-server, kcat, .venv-quix, .venv-faust), lint, run pytest"
	@echo "                 in TEST_WORKERS=3 processes (TEST_WORKERS=1: one)"
	@echo "make lint        ruff check + ruff format --check over $(LINT_PATHS), then mypy"
	@echo "                 (its packages and strictness: [tool.mypy] in pyproject.toml)"
	@echo "make fmt         ruff format + ruff check --fix over the same"
	@echo "make setup       the set-up of make run only"
	@echo "make setup-test  the set-up of make test only"
	@echo "make clean       remove caches and test artifacts; make distclean also .venv, node_modules, data"

# ---------------------------------------------------------------- main targets

run: setup
	@mkdir -p $(dir $(DEMO_CLUSTER))
	$(BIN)/plet web --demo --cluster $(DEMO_CLUSTER) --host $(WEB_HOST) --port $(WEB_PORT)

# Bytecode is cached for the run even where PYTHONDONTWRITEBYTECODE is set: each pytest
# worker collects every test module, and the tests start many Python processes (plet,
# replay runners, Spark's Python workers). Collection alone takes 16 s instead of 5 s
# without the cache. `make clean` removes the __pycache__ folders. The 25 slowest tests are
# listed at the end, to keep the suite's time in check (under 15 minutes).
test: setup-test lint
	env -u PYTHONDONTWRITEBYTECODE $(VPY) -m pytest $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder,) --durations=25 $(PYTEST_ARGS)

lint: $(STAMP_TEST)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy

fmt: $(STAMP_TEST)
	$(BIN)/ruff format $(LINT_PATHS)
	$(BIN)/ruff check --fix $(LINT_PATHS)

# ---------------------------------------------------------------- set-up

setup: system-run $(STAMP_RUN) $(STAMP_NPM)

setup-test: system-test $(STAMP_TEST) $(STAMP_NPM) $(STAMP_QUIX) $(STAMP_FAUST)

# System programs: each run only looks for files unless something is missing.
system-run:
	@bash scripts/system-deps.sh java

system-test:
	@bash scripts/system-deps.sh java chromium redis kcat

# The virtual environment. Its python is the target, so a broken or missing one
# (for example a .venv copied from another machine) is made anew, stamps and all.
$(VPY):
	@echo "setup: creating virtual environment $(VENV) with $$($(PYTHON) --version)"
	$(PYTHON) -m venv --clear $(VENV)
	$(PIP_INSTALL) --quiet --upgrade pip

# The project in editable mode with the Spark extra (pyspark is large: the first
# install takes a few minutes).
# setup.py and the compiled modules' sources: they are built again when those change
COMPILED_SOURCES := engine/storage/_kafka_records.pyx engine/storage/_columns.pyx \
	engine/client/accumulator.py \
	engine/client/partitioner.py engine/client/partitioner.pxd \
	engine/client/accumulator.pxd engine/_arena_cache.pyx
$(STAMP_RUN): pyproject.toml setup.py $(COMPILED_SOURCES) | $(VPY)
	@echo "setup: pip install -e '.[spark]'"
	$(PIP_INSTALL) -e '.[spark]'
	@touch $@

# The test extra includes the spark and bench extras, so it satisfies make run too.
$(STAMP_TEST): pyproject.toml setup.py $(COMPILED_SOURCES) | $(VPY)
	@echo "setup: pip install -e '.[test]'"
	$(PIP_INSTALL) -e '.[test]'
	@touch $@ $(STAMP_RUN)

# Quix Streams, pinned, in its own virtual environment (made anew when the pin changes:
# the stamp's name carries the version)
$(STAMP_QUIX):
	@echo "setup: creating $(QUIX_VENV) with quixstreams==$(QUIX_VERSION)"
	$(PYTHON) -m venv --clear $(QUIX_VENV)
	$(QUIX_VENV)/bin/python -m pip install --disable-pip-version-check $(if $(CI),--progress-bar off,) 'quixstreams==$(QUIX_VERSION)'
	@touch $@

# Faust, pinned, in its own virtual environment, made the same way
$(STAMP_FAUST):
	@echo "setup: creating $(FAUST_VENV) with faust-streaming==$(FAUST_VERSION)"
	$(PYTHON) -m venv --clear $(FAUST_VENV)
	$(FAUST_VENV)/bin/python -m pip install --disable-pip-version-check $(if $(CI),--progress-bar off,) 'faust-streaming==$(FAUST_VERSION)'
	@touch $@

# Web assets (htmx, pinned in package-lock.json), served from node_modules by the
# web console; node_modules is never committed. npm ci empties node_modules first,
# so the stamp inside it goes with it.
$(STAMP_NPM): package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "setup: ERROR: npm not found (Node.js 18+ with npm is needed for the web assets)" >&2; exit 1; }
	npm ci --no-audit --no-fund
	@touch $@

# ---------------------------------------------------------------- cleaning

clean:
	rm -rf .pytest_cache .ruff_cache .mypy_cache .hypothesis tests/artifacts bench/results
	find . -path ./.venv -prune -o -path ./$(QUIX_VENV) -prune -o -path ./$(FAUST_VENV) -prune -o -path ./node_modules -prune -o -name __pycache__ -type d -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(QUIX_VENV) $(FAUST_VENV) node_modules data *.egg-info
