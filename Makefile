# dsh developer commands. `make install` makes .venv; every other target uses it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint typecheck run chat demo bench check

$(BIN)/dsh: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(BIN)/dsh

install: $(BIN)/dsh

test: install
	$(BIN)/python -m pytest -q -n auto

lint: install
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts

typecheck: install
	$(BIN)/mypy

run: install
	$(BIN)/dsh acp

chat: install
	$(BIN)/dsh chat

demo: install
	@printf '%s\n' \
	  '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}' \
	  '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}' \
	  | $(BIN)/dsh acp

bench: install
	$(BIN)/python scripts/bench_loop.py
	$(BIN)/python scripts/bench_import.py
	$(BIN)/python scripts/bench_acp.py
	$(BIN)/python scripts/bench_persistence.py

check: lint typecheck test
