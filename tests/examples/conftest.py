"""Every example test runs twice: in memory (TestEnv) and on the AWS backends (AwsTestEnv: DynamoDB on AWS's
own DynamoDB Local, SQS on the moto server, the poller playing Lambda's event source, the real worker handler);
those of LOCALSTACK_EXAMPLES a third time, on LocalStack (its own SQS, DynamoDB Local behind its gateway).

The tests are written against TestEnv; on the "aws" run their module's `TestEnv` is swapped for
AwsTestEnv, which has the same interface. Tests that need the memory store's own features (fault
injection, the commit log) are marked `memory_only`.
"""

from __future__ import annotations

import functools

import pytest

from dormant.settings import Settings
from tests.aws_env import AwsTestEnv
from tests.localstack import ON_LOCALSTACK

# The examples that also run on LocalStack (`localstack` marker): a few, for the suite's time (each LocalStack
# run costs about twice the moto one); chosen for what differs there: batches and approvals (where LocalStack's
# queue counts once let AwsTestEnv declare idle too early), request/response, a crash and retry, timers.
LOCALSTACK_EXAMPLES = {"test_batch_drainer", "test_approval_gate", "test_request_response", "test_coordinator_rpc",
                       "test_timers"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "memory_only(reason): the test needs the in-memory store's own features")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    dropped = [item for item in items if item.path.parent.name == "examples" and "[localstack" in item.nodeid
               and item.path.stem not in LOCALSTACK_EXAMPLES]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in set(dropped)]


@pytest.fixture(autouse=True, params=["memory", "aws", pytest.param("localstack", marks=ON_LOCALSTACK)])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param in ("aws", "localstack"):
        if not hasattr(request.module, "TestEnv"):
            pytest.skip("runs no actors: once is enough")
        marker = request.node.get_closest_marker("memory_only")
        if marker is not None:
            pytest.skip(f"memory only: {marker.kwargs.get('reason') or marker.args[0]}")
        if request.param == "aws":
            settings = Settings(**request.getfixturevalue("aws_endpoints"))
        else:
            settings = Settings(endpoint_url=request.getfixturevalue("localstack_server"))
        monkeypatch.setattr(request.module, "TestEnv", functools.partial(AwsTestEnv, settings=settings))
    return str(request.param)
