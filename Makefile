# Dormant: `make test` runs checks + the whole suite; `make demo` runs the scripted tour.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := tools/node/node_modules/.installed

.PHONY: test fuzz demo check bench mutation clean deploy-tools sam-build lambda-layer build-WorkerFunction \
	build-ApiFunction build-DependenciesLayer chromium swagger-ui infra-zips infra-build scan-tools scan

# -- deployment (template.yaml, infra/; docs/deploy.md) ---------------------------------------------------------
# cfn-lint and the SAM CLI live in their own venv: their pins (aws-sam-translator, pydantic) are not the project's.
# cfn-lint 1.53.3 is the last release that runs the SAM translator (it catches dangling references in SAM resources).
DEPLOY_VENV := tools/deploy-venv
DEPLOY_PINS := cfn-lint==1.53.3 aws-sam-cli==1.170.0
empty :=
space := $(empty) $(empty)
DEPLOY_STAMP := $(DEPLOY_VENV)/.installed-$(subst $(space),+,$(subst ==,-,$(DEPLOY_PINS)))
# checkov (the security scan of template.yaml and infra/) in a venv of its own: its pins clash with the others.
SCAN_VENV := tools/scan-venv
SCAN_PINS := checkov==3.3.30
SCAN_STAMP := $(SCAN_VENV)/.installed-$(subst $(space),+,$(subst ==,-,$(SCAN_PINS)))
# Where `make infra-zips` puts the zips infra/ deploys (Terraform's code_zip / layer_zip default to these).
INFRA_BUILD ?= infra/.build
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

# -- the dashboard's browser tests (tests/ui): Debian's chromium, driven by Playwright (its own browser download
# cannot work here). Installed as root, non-interactively, when missing.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	$(if $(filter 0,$(shell id -u)),,sudo -n) env DEBIAN_FRONTEND=noninteractive sh -c \
		'apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null'

chromium: $(CHROMIUM)

# -- Swagger UI for /docs, served from the package (no CDN): npm's swagger-ui-dist, committed under
# lib/dormant/http/static/swagger (so a pip install or a Lambda bundle has it without a build step). This
# target refreshes it; tests/ui/test_assets.py checks the committed files are this version.
SWAGGER_UI_VERSION := 5.35.0
SWAGGER_UI_DIR := lib/dormant/http/static/swagger
SWAGGER_UI_FILES := swagger-ui-bundle.js swagger-ui-bundle.js.LICENSE.txt swagger-ui.css LICENSE NOTICE
swagger-ui:
	rm -rf build/swagger-ui && mkdir -p build/swagger-ui
	cd build/swagger-ui && npm pack --silent swagger-ui-dist@$(SWAGGER_UI_VERSION) >/dev/null \
		&& tar xzf swagger-ui-dist-$(SWAGGER_UI_VERSION).tgz
	for f in $(SWAGGER_UI_FILES); do cp build/swagger-ui/package/$$f $(SWAGGER_UI_DIR)/; done
	echo $(SWAGGER_UI_VERSION) > $(SWAGGER_UI_DIR)/VERSION

# DORMANT_DEPLOY_TOOLS / DORMANT_SCAN_TOOLS make tests/deploy fail (not skip) when a tool is missing (the
# Terraform AWS provider too: tests/deploy/test_terraform.py); DORMANT_CHROMIUM does the same for the browser tests.
test: check $(NODE_STAMP) $(DEPLOY_STAMP) $(SCAN_STAMP) $(CHROMIUM)
	DORMANT_DEPLOY_TOOLS=$(DEPLOY_VENV)/bin DORMANT_SCAN_TOOLS=$(SCAN_VENV)/bin DORMANT_CHROMIUM=$(CHROMIUM) \
		$(BIN)/python -m pytest

# The longer hostile-input runs (bounded, about 4 minutes): schemathesis over every operation, hypothesis with
# more examples, the kill -9 fault run for a minute, the outage tests; their figures land in build/.
FUZZ_ENV := DORMANT_FUZZ_EXAMPLES=20 DORMANT_PROPERTY_EXAMPLES=400 DORMANT_RELIABILITY_SECONDS=60 \
	DORMANT_OUTAGE_REPORT=build/outage.json DORMANT_RELIABILITY_REPORT=build/reliability.json
fuzz: check $(NODE_STAMP)
	mkdir -p build
	$(FUZZ_ENV) $(BIN)/python -m pytest --timeout=600 tests/api/test_fuzz.py tests/api/test_properties.py \
		tests/reliability tests/integration/test_send_path.py
	cat build/outage.json build/reliability.json

demo: $(STAMP)
	$(BIN)/python -m examples.tour

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py

# Deleting any compensation handler, timeout, names= filter, broadcast or race branch in examples/ must make a
# test fail (tests/mutation/check.py); about a minute on 2 cores, fails past its 150 s budget.
mutation: $(STAMP)
	$(BIN)/python -m tests.mutation.check

$(DEPLOY_STAMP):
	test -x $(DEPLOY_VENV)/bin/python || $(PYTHON) -m venv $(DEPLOY_VENV)
	$(DEPLOY_VENV)/bin/python -m pip install --quiet $(DEPLOY_PINS)
	touch $(DEPLOY_STAMP)

deploy-tools: $(DEPLOY_STAMP)

$(SCAN_STAMP):
	test -x $(SCAN_VENV)/bin/python || $(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/python -m pip install --quiet $(SCAN_PINS)
	touch $(SCAN_STAMP)

scan-tools: $(SCAN_STAMP)

# The security scan alone (make test runs it too, in tests/deploy/test_scan.py): offline, no check skipped
# except those marked in the files themselves, each with its reason (listed in docs/deploy.md).
scan: $(SCAN_STAMP)
	$(SCAN_VENV)/bin/checkov --skip-download --quiet --compact -f template.yaml --framework cloudformation
	$(SCAN_VENV)/bin/checkov --skip-download --quiet --compact -d infra --framework terraform

# `sam build` (into .aws-sam/build): the functions are pure Python and build offline; the layer downloads wheels.
sam-build: $(DEPLOY_STAMP)
	SAM_CLI_TELEMETRY=0 $(DEPLOY_VENV)/bin/sam build --template-file template.yaml

# sam build runs these targets (BuildMethod: makefile) in this directory with ARTIFACTS_DIR set.
# Both functions get the same bundle: lib/dormant, functions/ and the registry's package (what infra/ zips too).
build-WorkerFunction build-ApiFunction:
	test -n "$(ARTIFACTS_DIR)"
	mkdir -p "$(ARTIFACTS_DIR)"
	cd lib && find dormant -name '*.py' -exec cp --parents {} "$(ARTIFACTS_DIR)" \;
	cd lib && find dormant/http/static -type f -exec cp --parents {} "$(ARTIFACTS_DIR)" \;
	find functions -name '*.py' -exec cp --parents {} "$(ARTIFACTS_DIR)" \;
	cd "$$(dirname "$(APP_DIR)")" && find "$$(basename "$(APP_DIR)")" -name '*.py' -exec cp --parents {} "$(ARTIFACTS_DIR)" \;

build-DependenciesLayer:
	test -n "$(ARTIFACTS_DIR)"
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --no-compile \
		--root-user-action=ignore --target "$(ARTIFACTS_DIR)/python" \
		--implementation cp --python-version $(LAMBDA_PYTHON) --platform $(LAMBDA_PLATFORM) --only-binary=:all: \
		$(LAYER_REQUIREMENTS) $(LAYER_EXTRA)

# The same layer for infra/; `make infra-zips` zips it.
lambda-layer:
	rm -rf $(LAYER_DIR)
	$(MAKE) --no-print-directory build-DependenciesLayer ARTIFACTS_DIR="$(CURDIR)/$(LAYER_DIR)"

# The zips infra/ deploys (Terraform has no archive provider here): the functions' bundle, the same files as
# build-WorkerFunction (lib/dormant, functions/, APP_DIR), and the layer from $(LAYER_DIR). Reproducible zips:
# Terraform's source_code_hash changes only when a file does.
infra-zips:
	$(PYTHON) tools/bundle.py code $(INFRA_BUILD)/code.zip --app-dir $(APP_DIR)
	$(PYTHON) tools/bundle.py layer $(INFRA_BUILD)/layer.zip $(LAYER_DIR)

# Everything `terraform apply` in infra/ needs: the layer (from PyPI) and both zips.
infra-build:
	$(MAKE) --no-print-directory lambda-layer
	$(MAKE) --no-print-directory infra-zips

clean:
	rm -rf $(VENV) $(DEPLOY_VENV) $(SCAN_VENV) .pytest_cache .mypy_cache .ruff_cache .aws-sam build
