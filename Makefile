# Dormant: `make test` runs checks + the whole suite; `make demo` runs the scripted tour.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := tools/node/node_modules/.installed

.PHONY: test demo check bench soak clean deploy-tools sam-build lambda-layer build-WorkerFunction build-ApiFunction \
	build-DependenciesLayer

# -- deployment (template.yaml, infra/; docs/deploy.md) ---------------------------------------------------------
# cfn-lint and the SAM CLI live in their own venv: their pins (aws-sam-translator, pydantic) are not the project's.
# cfn-lint 1.53.3 is the last release that runs the SAM translator (it catches dangling references in SAM resources).
DEPLOY_VENV := tools/deploy-venv
DEPLOY_PINS := cfn-lint==1.53.3 aws-sam-cli==1.170.0
empty :=
space := $(empty) $(empty)
DEPLOY_STAMP := $(DEPLOY_VENV)/.installed-$(subst $(space),+,$(subst ==,-,$(DEPLOY_PINS)))
# The package of the registry that DORMANT_APP names, bundled into the functions (a directory or a single .py).
APP_DIR ?= examples
# The layer's wheels: Lambda's python3.13 on arm64 (template.yaml and infra/ say the same).
LAMBDA_PYTHON ?= 3.13
LAMBDA_PLATFORM ?= manylinux2014_aarch64
LAYER_DIR ?= build/lambda/layer
# Extra pip requirements of your registry's code, added to the layer (e.g. LAYER_EXTRA="stripe==12.1.0").
LAYER_EXTRA ?=
LAYER_REQUIREMENTS = $(shell $(PYTHON) -c "import tomllib; print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))")

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

# DORMANT_DEPLOY_TOOLS makes tests/deploy fail (not skip) when a tool is missing.
test: check $(NODE_STAMP) $(DEPLOY_STAMP)
	DORMANT_DEPLOY_TOOLS=$(DEPLOY_VENV)/bin $(BIN)/python -m pytest

# The long soak of `dormant dev` (a few minutes, bounded): thousands of requests, idling, kill -9 and restarts.
soak: $(STAMP)
	DORMANT_SOAK=long timeout 900 $(BIN)/python -m pytest tests/e2e/test_dev_soak.py -p no:cacheprovider --timeout 800

demo: $(STAMP)
	$(BIN)/python -m examples.tour

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py

$(DEPLOY_STAMP):
	test -x $(DEPLOY_VENV)/bin/python || $(PYTHON) -m venv $(DEPLOY_VENV)
	$(DEPLOY_VENV)/bin/python -m pip install --quiet $(DEPLOY_PINS)
	touch $(DEPLOY_STAMP)

deploy-tools: $(DEPLOY_STAMP)

# `sam build` (into .aws-sam/build): the functions are pure Python and build offline; the layer downloads wheels.
sam-build: $(DEPLOY_STAMP)
	SAM_CLI_TELEMETRY=0 $(DEPLOY_VENV)/bin/sam build --template-file template.yaml

# sam build runs these targets (BuildMethod: makefile) in this directory with ARTIFACTS_DIR set.
# Both functions get the same bundle: lib/dormant, functions/ and the registry's package (what infra/ zips too).
build-WorkerFunction build-ApiFunction:
	test -n "$(ARTIFACTS_DIR)"
	mkdir -p "$(ARTIFACTS_DIR)"
	cd lib && find dormant -name '*.py' -exec cp --parents {} "$(ARTIFACTS_DIR)" \;
	find functions -name '*.py' -exec cp --parents {} "$(ARTIFACTS_DIR)" \;
	cd "$$(dirname "$(APP_DIR)")" && find "$$(basename "$(APP_DIR)")" -name '*.py' -exec cp --parents {} "$(ARTIFACTS_DIR)" \;

build-DependenciesLayer:
	test -n "$(ARTIFACTS_DIR)"
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --no-compile \
		--root-user-action=ignore --target "$(ARTIFACTS_DIR)/python" \
		--implementation cp --python-version $(LAMBDA_PYTHON) --platform $(LAMBDA_PLATFORM) --only-binary=:all: \
		$(LAYER_REQUIREMENTS) $(LAYER_EXTRA)

# The same layer for infra/ (Terraform zips $(LAYER_DIR)); run it before `terraform apply`.
lambda-layer:
	rm -rf $(LAYER_DIR)
	$(MAKE) --no-print-directory build-DependenciesLayer ARTIFACTS_DIR="$(CURDIR)/$(LAYER_DIR)"

clean:
	rm -rf $(VENV) $(DEPLOY_VENV) .pytest_cache .mypy_cache .ruff_cache .aws-sam build
