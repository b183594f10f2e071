# dsh developer commands. `make install` makes .venv; every other target uses it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint typecheck run bench check

$(BIN)/dsh: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(BIN)/dsh

install: $(BIN)/dsh

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts

typecheck: install
	$(BIN)/mypy

run: install
	$(BIN)/dsh prompt "hello from dsh on the offline echo model"

bench: install
	$(BIN)/python scripts/bench_loop.py
	$(BIN)/python scripts/bench_import.py

check: lint typecheck test
