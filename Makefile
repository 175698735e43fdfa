# Switchboard developer commands. `make help` lists them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install chat serve test bench lint format typecheck clean

help: ## Show this list of targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "Switchboard needs Python 3.11 or newer (found: $$($(PYTHON) --version 2>&1))"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP) ## Create .venv with Switchboard (editable) and the dev tools; safe to re-run

chat: install ## Chat in the terminal with the embedded default (no keys needed: demo model)
	@$(BIN)/switchboard chat

serve: install ## Run every configured chat platform with a worker, in one process
	@$(BIN)/switchboard serve

test: install ## Run the whole test suite
	$(BIN)/pytest

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
