# Switchboard developer commands. `make help` lists them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-installed
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install chat serve test test-deps bench lint format typecheck clean

help: ## Show this list of targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-10s %s\n", $$1, $$2}'

# Two stamps: what running Switchboard needs (`chat`, `serve`) and, on top, the dev tools
# (pytest, Playwright, ruff, mypy...) for test, lint, typecheck and bench.
$(RUNTIME): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "Switchboard needs Python 3.11 or newer (found: $$($(PYTHON) --version 2>&1))"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	@touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP) ## Create .venv with Switchboard (editable) and the dev tools; safe to re-run

chat: $(RUNTIME) ## Chat in the terminal with the embedded default (no keys needed: demo model)
	@$(BIN)/switchboard chat

serve: $(RUNTIME) ## Run every configured chat platform with a worker, in one process
	@$(BIN)/switchboard serve

test-deps: ## Install redis-server, chromium and PostgreSQL if missing (or say how)
	@scripts/install-test-deps

# Two pytest runs: the end-to-end tier (real subprocesses, a browser) apart from the rest, so a
# slow or leaky e2e test cannot fail an unrelated unit test. Both always run; either failing
# fails `make test`. The first runs in PYTEST_WORKERS pytest-xdist workers (auto: one per CPU;
# 0: in one process), each with its own redis-server and PostgreSQL, a test file per worker at
# a time (docs/testing.md).
PYTEST_WORKERS ?= auto
test: test-deps install ## Run the whole test suite: unit, integration and contract, then end-to-end
	@status=0; \
	echo "== tests: unit, integration, contract =="; \
	$(BIN)/pytest --ignore=tests/e2e -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS) || status=1; \
	echo "== tests: end-to-end =="; \
	$(BIN)/pytest tests/e2e $(PYTEST_ARGS) || status=$$((status + 2)); \
	case $$status in \
		0) echo "make test: both tiers passed";; \
		1) echo "make test: FAILED in unit, integration and contract (end-to-end passed)";; \
		2) echo "make test: FAILED in end-to-end (unit, integration and contract passed)";; \
		*) echo "make test: FAILED in both tiers";; \
	esac; \
	exit $$((status > 0))

bench: install ## Run the benchmarks (docs/performance.md); tables printed, JSON in bench/results/
	$(BIN)/python -m bench

lint: install ## Check style and common bugs (ruff), the Dockerfile and the Compose file
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/hadolint Dockerfile
	$(BIN)/check-jsonschema --builtin-schema vendor.compose-spec deploy/docker-compose.yml

format: install ## Reformat the code and apply safe lint fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: install ## Check types (mypy, strict: core, channels, bots, bench and tests)
	$(BIN)/mypy

clean: ## Remove the virtualenv and caches (keeps ./data)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
