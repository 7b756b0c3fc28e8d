"""Fixtures for tests against real servers over HTTP: a fresh DynamoDB event store per test, on the session's
DynamoDB Local, moto server and dynalite, and an endpoint of DynamoDB and SQS (the moto server, LocalStack);
the servers are started by tests/conftest.py."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiobotocore.session import AioSession, get_session  # type: ignore[import-untyped]

from dormant.dynamodb.store import DynamoEventStore
from dormant.settings import Settings
from tests.localstack import ON_LOCALSTACK
from tests.servers import ServerProcess


def server_for(request: pytest.FixtureRequest, name: str) -> ServerProcess:
    process: ServerProcess = request.getfixturevalue(f"{name}_server_process")
    return process


_SESSION: AioSession | None = None


def shared_session() -> AioSession:
    """One botocore session for the whole run: loading the service models again per test costs ~0.1 s."""
    global _SESSION
    if _SESSION is None:
        _SESSION = get_session()
    return _SESSION


def store_settings(endpoint: str, **overrides: Any) -> Settings:
    return Settings(table=f"dormant-{uuid.uuid4().hex[:12]}", endpoint_url=endpoint, region="us-east-1",
                    **overrides)


@pytest.fixture(params=["dynamodb_local", pytest.param("localstack", marks=ON_LOCALSTACK)])
def stack_endpoints(request: pytest.FixtureRequest) -> dict[str, str]:
    """Settings fields of an AWS stack: DynamoDB Local with moto's SQS (`aws_endpoints`), then LocalStack (its own
    SQS, DynamoDB Local behind its gateway)."""
    if request.param == "localstack":
        return {"endpoint_url": server_for(request, "localstack").endpoint}
    endpoints: dict[str, str] = request.getfixturevalue("aws_endpoints")
    return endpoints


@pytest.fixture(params=["dynamodb_local", "moto", "dynalite"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[DynamoEventStore]:
    """A DynamoEventStore on a freshly created table, on each server in turn; the server is reset after."""
    server = server_for(request, request.param)
    async with DynamoEventStore.connect(store_settings(server.endpoint), session=shared_session()) as created:
        await created.create_table()
        yield created
    server.reset()


class RequestLog:
    """Every DynamoDB API call a client makes (botocore's `before-call` hook), by operation name."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def hook(self, model: Any, **_: Any) -> None:
        self.calls.append(model.name)

    def counts(self) -> Counter[str]:
        return Counter(self.calls)

    def clear(self) -> None:
        self.calls.clear()


def watch(client: Any) -> RequestLog:
    log = RequestLog()
    client.meta.events.register("before-call.dynamodb", log.hook)
    return log
