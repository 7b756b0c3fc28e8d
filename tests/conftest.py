"""Shared pytest configuration (asyncio mode is `auto`, see pyproject.toml).

The real servers (a moto server and dynalite, tests/servers.py) start once per session on 127.0.0.1,
only when a test asks for them; fake AWS credentials make sure nothing can reach a real account.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import Dynalite, MotoServer, fake_aws_environment, scrubbed_variables


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
def moto_server(moto_server_process: MotoServer) -> str:
    """Endpoint URL of the session's moto server (DynamoDB, SQS, ...)."""
    return moto_server_process.endpoint


@pytest.fixture(scope="session")
def dynalite_server(dynalite_server_process: Dynalite) -> str:
    """Endpoint URL of the session's dynalite server (DynamoDB only)."""
    return dynalite_server_process.endpoint


