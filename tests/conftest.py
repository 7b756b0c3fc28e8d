"""Shared pytest configuration (asyncio mode is `auto`, see pyproject.toml).

The real servers (DynamoDB Local, a moto server and dynalite, tests/servers.py) start once per session on 127.0.0.1,
only when a test asks for them; fake AWS credentials make sure nothing can reach a real account.

Two tiers (docs/testing.md, "The project's own tests"), decided here and nowhere else (`TIER2_*` below): every test
is in tier 1 (`make test`, every commit: `-m "not tier2"`) unless a rule below, or its own `tier2` marker (the
second-tier backends of tests/contract), puts it in tier 2, the release tier (`make check`).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

from tests.servers import Dynalite, DynamoDBLocal, MotoServer, fake_aws_environment, scrubbed_variables

# A property test that sets no count of its own runs DORMANT_PROPERTY_EXAMPLES examples (`make fuzz` runs more), and
# none has a deadline: a loaded machine must not fail an example for being slow.
hypothesis_settings.register_profile(
    "dormant", deadline=None, max_examples=int(os.environ.get("DORMANT_PROPERTY_EXAMPLES", "100")))
hypothesis_settings.load_profile("dormant")


@pytest.fixture(scope="session", autouse=True)
def fake_aws_credentials() -> Iterator[None]:
    """Credentials and region for the local servers; nothing can reach a real account."""
    with pytest.MonkeyPatch.context() as patch:
        for name in scrubbed_variables():
            patch.delenv(name)
        for name, value in fake_aws_environment().items():
            patch.setenv(name, value)
        yield


@pytest.fixture(scope="session")
def moto_server_process() -> Iterator[MotoServer]:
    server = MotoServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def dynalite_server_process() -> Iterator[Dynalite]:
    server = Dynalite()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def dynamodb_local_server_process() -> Iterator[DynamoDBLocal]:
    server = DynamoDBLocal()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def dynamodb_local_server(dynamodb_local_server_process: DynamoDBLocal) -> str:
    """Endpoint URL of the session's DynamoDB Local (AWS's own emulator: DynamoDB only)."""
    return dynamodb_local_server_process.endpoint


@pytest.fixture(scope="session")
def aws_endpoints(moto_server: str, dynamodb_local_server: str) -> dict[str, str]:
    """Settings fields for the AWS stack the suite runs on: DynamoDB on AWS's own DynamoDB Local (as strict as
    DynamoDB where moto is not), SQS (and the rest) on moto: `Settings(**aws_endpoints, ...)`."""
    return {"endpoint_url": moto_server, "dynamodb_endpoint_url": dynamodb_local_server}


@pytest.fixture(scope="session")
def aws_endpoint_environment(aws_endpoints: dict[str, str]) -> dict[str, str]:
    """The same as environment variables, for subprocesses (a Lambda handler, a worker process)."""
    return {"AWS_ENDPOINT_URL": aws_endpoints["endpoint_url"],
            "AWS_ENDPOINT_URL_DYNAMODB": aws_endpoints["dynamodb_endpoint_url"]}


@pytest.fixture(scope="session")
def moto_server(moto_server_process: MotoServer) -> str:
    """Endpoint URL of the session's moto server (DynamoDB, SQS, ...)."""
    return moto_server_process.endpoint


@pytest.fixture(scope="session")
def dynalite_server(dynalite_server_process: Dynalite) -> str:
    """Endpoint URL of the session's dynalite server (DynamoDB only)."""
    return dynalite_server_process.endpoint


# -- tiers ---------------------------------------------------------------------------------------------------------
# Tier 2, the release tier (`make check`), is what needs a tool or a server that tier 1 does not install or start, or
# what runs for minutes: the deployment checks (SAM, cfn-lint, Terraform on moto, checkov, the layer builds), the
# browser, the wheel install, LocalStack, the DynamoDB store on a second server (moto's DynamoDB, dynalite) or on
# botocore in threads, the examples again on the AWS stack, the fuzzing, the kill -9 run and the soak.
TIER2_PATHS = (
    "tests/deploy/",  # SAM, cfn-lint, Terraform apply on moto, checkov, the layer and bundle builds
    "tests/reliability/",  # kill -9 of workers under load (DORMANT_RELIABILITY_SECONDS)
    "tests/integration/test_moto_persistence.py",  # kill -9 and restarts of the dev stack's moto, byte for byte
    "tests/ui/test_dashboard.py", "tests/ui/test_dashboard_callbacks.py", "tests/ui/test_pause_and_rewind.py",
    "tests/ui/test_search_dashboard.py", "tests/ui/test_dashboard_real_data.py",  # Chromium
    "tests/ui/test_realtime_dashboard.py",  # Chromium
    "tests/e2e/test_install.py",  # the wheel built and installed into a new venv
    "tests/docs/test_terraform_recipe.py",  # docs/deploy.md's Terraform recipe on moto, as written (minutes)
    "tests/docs/test_dev_blocks.py",  # README's blocks on a real `dormant dev` (12 s under load: tier 1 is full)
    "tests/docs/test_site.py",  # the docs site built strictly with mkdocs (its own venv, tools/docs-venv)
    "tests/e2e/test_dev_soak.py",  # the soak of `dormant dev` (DORMANT_SOAK)
    # One feature's walkthrough each on a real `dormant dev` process (1.5-2 minutes together): tier 1 keeps the dev
    # stack's own end-to-end tests (start, stop on a signal, kill -9, the console, the demo tour, the terminal CLI),
    # and each of these features' behaviour on the same AWS stack in its integration tests.
    "tests/e2e/test_operations.py", "tests/e2e/test_pause_and_rewind.py", "tests/e2e/test_dev_large_values.py",
    "tests/e2e/test_dev_limits.py", "tests/e2e/test_dev_map.py", "tests/e2e/test_dev_search.py",
    "tests/e2e/test_dev_burst.py", "tests/e2e/test_dev_callbacks.py",
    "tests/e2e/test_dev_localstack.py", "tests/integration/test_localstack_launcher.py",  # LocalStack
    "tests/api/test_fuzz_operations.py",  # schemathesis, every operation
    # `dormant dev --dynamodb local` (a JVM beside the stack): tier 1 runs the embedded default (the `moto` case) and
    # the DynamoDB store on DynamoDB Local in process
    "tests/e2e/test_dev_stack.py::test_dev_runs_the_whole_stack_and_stops_on_ctrl_c[local]",
    # a model-based property test that explores at random (derandomize=False; `make fuzz` runs 3,000 steps)
    "tests/integration/test_offload_lifecycle.py::test_no_item_refers_to_a_missing_object_and_no_object_lives_forever",
)
# Parameter values (a fixture's backend) that run on a second-tier server: dynalite (a third DynamoDB), LocalStack
# (a JVM, ~700 MB), the DynamoDB store on botocore's client in threads (what Lambda runs; tier 1 has aiobotocore's).
TIER2_BACKENDS = re.compile(r"^(?:dynalite|localstack)(?:-.*)?$|[-_]threads$")
# The DynamoDB store is tested in tier 1 on one server, AWS's own DynamoDB Local (as strict as DynamoDB where moto is
# not: docs/testing.md), and again on moto's DynamoDB in tier 2, as Temporal's suite picks its backend once per
# session: the same tests on a second server doubled tier 1's AWS-stack time (about 200 s of 1,340 in a tier-1 run).
# These are the fixtures whose parameter names the server under the DynamoDB store; a parameter "moto" elsewhere is
# SQS's server (tests/integration/test_transport.py: `endpoint`) or `dormant dev`'s embedded default
# (tests/e2e/test_dev_stack.py: `dynamodb`), both tier 1. tests/unit/test_tiers.py pins which is which.
DYNAMODB_SERVER_PARAMETERS = frozenset({"backend", "store", "aws", "env", "endpoints", "server", "server_name",
                                        "clocked", "dynamo"})
TIER2_DYNAMODB = re.compile(r"^moto(?:-.*)?$")
TIER2_MARKERS = ("tier2", "localstack")


def tier_of(item: pytest.Item) -> int:
    """1 or 2: see TIER2_* above."""
    if any(item.get_closest_marker(name) is not None for name in TIER2_MARKERS):
        return 2
    where = item.nodeid
    if where.startswith(TIER2_PATHS):
        return 2
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(isinstance(value, str) and TIER2_BACKENDS.search(value) for value in params.values()):
        return 2
    if any(isinstance(params.get(name), str) and TIER2_DYNAMODB.match(params[name])
           for name in DYNAMODB_SERVER_PARAMETERS):
        return 2
    # the examples run in memory in tier 1, and again on the AWS stack (tests/examples/conftest.py) in tier 2
    return 2 if where.startswith("tests/examples/") and params.get("backend") == "aws" else 1


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "localstack: runs on LocalStack (tests/localstack.py; `make localstack-tools`)")
    config.addinivalue_line("markers", "tier2: the release tier (`make check`), not run by `make test`; see "
                                       "tests/conftest.py")


def pytest_ignore_collect(collection_path: Any, config: pytest.Config) -> bool | None:
    """Under `-m "not tier2"` (`make test`), the whole files and folders of TIER2_PATHS are not even imported: each
    xdist worker collects the suite itself, and importing them (the browser's, the deployment's, schemathesis' cases
    built per operation at import) only to deselect every test cost each worker seconds."""
    if config.getoption("markexpr", "") != "not tier2":
        return None
    where = Path(str(collection_path)).resolve()
    try:
        relative = where.relative_to(config.rootpath).as_posix()
    except ValueError:
        return None
    if where.is_dir():
        relative += "/"
    return True if any(relative.startswith(path) for path in _TIER2_WHOLE) else None


_TIER2_WHOLE = tuple(path for path in TIER2_PATHS if "::" not in path)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks the tier-2 tests `tier2` (then `-m "not tier2"` selects tier 1)."""
    for item in items:
        if tier_of(item) == 2 and item.get_closest_marker("tier2") is None:
            item.add_marker(pytest.mark.tier2)
        if item.nodeid.startswith("tests/e2e/") and item.get_closest_marker("timeout") is None and \
                config.getoption("timeout", None) is None:  # (`--timeout`, as `make soak` gives, has the say)
            item.add_marker(pytest.mark.timeout(600))  # real `dormant dev` processes, started again and again


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadscope`: by module, and the LocalStack tests on one worker (tests/xdist_scheduling.py)."""
    from tests.xdist_scheduling import scheduler

    return scheduler(config, log) if config.getvalue("dist") == "loadscope" else None


@pytest.fixture(scope="session")
def localstack_server_process() -> Iterator[Any]:
    from tests.localstack import started_or_skipped

    yield from started_or_skipped()


@pytest.fixture(scope="session")
def localstack_server(localstack_server_process: Any) -> str:
    """Endpoint URL of the session's LocalStack (its own SQS; DynamoDB through DynamoDB Local)."""
    return str(localstack_server_process.endpoint)


@pytest.fixture(scope="session")
def terraform_run() -> Iterator[Any]:
    """infra/ applied to a moto server by Terraform, in the background (tests/deploy/terraform.py)."""
    from tests.deploy.support import terraform
    from tests.deploy.terraform import TerraformRun, provider_mirror

    run = TerraformRun(terraform(), provider_mirror())
    yield run
    run.close()  # waits for the background destroy and fails the session if it left anything


@pytest.fixture(scope="session", autouse=True)
def _terraform_starts_with_the_session(request: pytest.FixtureRequest) -> None:
    """Terraform's apply mostly waits (minutes, on the AWS provider's SQS timers): when
    tests/deploy/test_terraform.py is selected, it starts with the first test and the suite runs beside it."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # every worker collects every test: the apply starts with the first Terraform test instead, on the worker
        # that runs the module (tests/xdist_scheduling.py)
        return
    if shutil.which("terraform") and any(item.path.name == "test_terraform.py" for item in request.session.items):
        request.getfixturevalue("terraform_run").start()
