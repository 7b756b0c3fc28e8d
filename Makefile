# Dormant: `make test` runs checks + the whole suite; `make demo` runs the scripted tour.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := tools/node/node_modules/.installed

.PHONY: test demo check bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# dynalite (a second, independent DynamoDB implementation) for the store's integration tests.
$(NODE_STAMP): tools/node/package.json tools/node/package-lock.json
	cd tools/node && npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

check: $(STAMP)
	$(BIN)/ruff check lib examples tests benchmarks
	$(BIN)/mypy --strict lib/dormant
	$(BIN)/mypy examples

test: check $(NODE_STAMP)
	$(BIN)/python -m pytest

demo: $(STAMP)
	$(BIN)/python -m examples.tour

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
