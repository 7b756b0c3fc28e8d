# Dormant: `make test` runs checks + the whole suite; `make demo` runs the scripted tour.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo check bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

check: $(STAMP)
	$(BIN)/ruff check lib examples tests benchmarks
	$(BIN)/mypy --strict lib/dormant
	$(BIN)/mypy examples

test: check
	$(BIN)/python -m pytest

demo: $(STAMP)
	$(BIN)/python -m examples.tour

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
