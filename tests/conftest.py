"""Shared pytest configuration (asyncio mode is `auto`, see pyproject.toml).

The real servers (DynamoDB Local, a moto server and dynalite, tests/servers.py) start once per session on 127.0.0.1,
only when a test asks for them; fake AWS credentials make sure nothing can reach a real account.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.servers import Dynalite, DynamoDBLocal, MotoServer, fake_aws_environment, scrubbed_variables


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "localstack: runs on LocalStack (tests/localstack.py; `make localstack-tools`)")


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
