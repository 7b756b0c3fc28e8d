"""Every example test runs twice: in memory (TestEnv) and on the AWS backends (AwsTestEnv: DynamoDB on AWS's
own DynamoDB Local, SQS on the moto server, the poller playing Lambda's event source, the real worker handler).

The tests are written against TestEnv; on the "aws" run their module's `TestEnv` is swapped for
AwsTestEnv, which has the same interface. Tests that need the memory store's own features (fault
injection, the commit log) are marked `memory_only`.
"""

from __future__ import annotations

import functools

import pytest

from dormant.settings import Settings
from tests.aws_env import AwsTestEnv


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "memory_only(reason): the test needs the in-memory store's own features")


@pytest.fixture(autouse=True, params=["memory", "aws"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "aws":
        if not hasattr(request.module, "TestEnv"):
            pytest.skip("runs no actors: once is enough")
        marker = request.node.get_closest_marker("memory_only")
        if marker is not None:
            pytest.skip(f"memory only: {marker.kwargs.get('reason') or marker.args[0]}")
        settings = Settings(**request.getfixturevalue("aws_endpoints"))
        monkeypatch.setattr(request.module, "TestEnv", functools.partial(AwsTestEnv, settings=settings))
    return str(request.param)
