# Two entry points that work on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# What is installed: the checkout, editable. The release workflow tests its built wheel instead:
#   make test EDITABLE= PACKAGE=dist/pve_steward-X.Y.Z-py3-none-any.whl
EDITABLE ?= -e
PACKAGE  ?= .
# Stamps: the package and its runtime dependencies (all `make demo` needs, no dev extra), and the same
# plus the dev extra (test, lint and packaging tools) for `make test`.
RUNTIME  = $(VENV)/.runtime
STAMP    = $(VENV)/.installed
# pytest-xdist workers of `make test`: one per CPU and one more, for the CPU a test leaves idle while it waits
# on a server it started or on Chromium (2 CPUs: 6 min 39 s with three workers, 8 min 1 s with two and 6 min 49 s
# with four; record 261207-70)
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))

.PHONY: setup runtime interop demo demo-stdio check test lint typecheck bench conformance docs clean dist mcpb image

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUNTIME): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(EDITABLE) '$(PACKAGE)'
	touch $(RUNTIME)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(EDITABLE) '$(PACKAGE)[dev]'
	touch $(STAMP) $(RUNTIME)

runtime: $(RUNTIME)  ## the runtime only (no dev extra)
setup: $(STAMP)

interop:             ## the official MCP Inspector CLI and conformance suite, for tests/interop (Node 22 from PyPI)
	scripts/interop/setup.sh || echo "WARNING: MCP interop clients not installed: tests/interop will be skipped"

demo: runtime        ## the server against the built-in simulated cluster (HTTP, prints an Inspector command)
	$(BIN)/pve-steward demo

demo-stdio: runtime  ## same, over stdio for desktop clients
	$(BIN)/pve-steward demo --stdio

lint: setup
	$(BIN)/ruff check src tests scripts bench
	$(BIN)/ruff format --check src tests scripts bench

typecheck: setup
	$(BIN)/mypy

# The tests keep bytecode, compiled once up front: where PYTHONDONTWRITEBYTECODE is set (this project's CI
# machines set it), each of the ~110 servers and checks the suite starts compiled our modules again (0.5 s of
# CPU each), and each worker rewrote every test module's asserts (record 261206-67).
KEEP_BYTECODE = env -u PYTHONDONTWRITEBYTECODE
COMPILE       = $(KEEP_BYTECODE) $(BIN)/python -m compileall -q -j 0 src tests

check: setup lint typecheck  ## the fast loop (under a minute): lint, types, unit and contract tests
	$(COMPILE)
	$(KEEP_BYTECODE) $(BIN)/python -m pytest -q -n 2 tests/unit tests/contract

test: setup interop lint typecheck  ## lint, type-check and run the whole suite (interop clients included), in parallel
	$(COMPILE)
	$(KEEP_BYTECODE) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

conformance: setup interop  ## the MCP conformance suite against the demo server, checked against its baseline
	scripts/interop/conformance.sh

bench: setup
	for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f; done; \
	echo "== bench/bench_heavy.py --diagnostics-process"; $(BIN)/python bench/bench_heavy.py --diagnostics-process
	# each prints its figures and MET/MISSED; the last measures --diagnostics-process (261206-60)

dist: setup          ## the wheel and sdist PyPI gets, into dist/
	$(BIN)/uv build --out-dir dist

mcpb: setup          ## the MCP Bundle for one-click install in Claude Desktop, into dist/ (a zip; no npm needed)
	$(BIN)/python scripts/build_mcpb.py --out-dir dist

image:               ## the container image pve-steward:latest (needs a Docker daemon)
	docker build -t pve-steward .

clean:
	rm -rf $(VENV) .interop .pytest_cache .ruff_cache .mypy_cache dist
