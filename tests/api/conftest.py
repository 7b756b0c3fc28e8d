"""Fixtures of the API tests. `connect` is THE parity fixture: the same test body runs once with the
in-process client and once with the HTTP client against uvicorn serving the API over the same env."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest

from dormant.http.app import create_app
from dormant.http.client import HttpClient
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.apps import GATE
from tests.api.support import serve

Connect = Callable[[TestEnv], Awaitable[Any]]


@pytest.fixture(params=["in-process", "http"])
async def connect(request: pytest.FixtureRequest) -> AsyncIterator[Connect]:
    async with AsyncExitStack() as stack:
        async def client_for(env: TestEnv) -> Any:
            if request.param == "in-process":
                return env.client
            app = create_app(env.registry, Settings(dev=True), service=env.service)
            url = await stack.enter_async_context(serve(app))
            return await stack.enter_async_context(HttpClient(url, registry=env.registry))

        yield client_for


@pytest.fixture(autouse=True)
def reset_gate() -> None:
    GATE.hang = False
    GATE.runs = 0
    GATE.entered = asyncio.Event()  # one per test: an Event belongs to the loop that waits on it
