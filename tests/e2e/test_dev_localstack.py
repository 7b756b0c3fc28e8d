"""`dormant dev --endpoint` on LocalStack, as docs/localstack.md tells a user to run it: messages, a timer that
fires through LocalStack's own SQS delays, and request/response, all over the HTTP API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dormant.http.client import HttpClient
from tests.e2e.devprocess import DevProcess, environment
from tests.localstack import ON_LOCALSTACK

pytestmark = list(ON_LOCALSTACK)


@pytest.fixture
def dev(localstack_server_process: Any, tmp_path: Path) -> Iterator[DevProcess]:
    # The credentials docs/localstack.md gives (LocalStack takes any; an access key that is not a 12-digit account
    # id is account 000000000000).
    env = environment(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")
    env.pop("AWS_SESSION_TOKEN", None)
    process = DevProcess(tmp_path / "data", "--endpoint", localstack_server_process.endpoint,
                         app="examples.app:registry", env=env)
    try:
        yield process.start()
        process.stop()
        output = process.output()
        assert f"AWS        {localstack_server_process.endpoint}" in output
        assert "ERROR" not in output, output
    finally:
        process.kill()
        localstack_server_process.reset()


async def _until(read: Any, done: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not done(value := await read()):
        assert time.monotonic() < deadline, value
        time.sleep(0.1)
    return value


async def test_messages_timers_and_request_response_on_localstack(dev: DevProcess) -> None:
    async with HttpClient(dev.url) as client:
        counter = client.get_or_create("workflow-counter", ["localstack"])
        for delta in (2, 3, 37):
            assert (await counter.send("counter", {"delta": delta})).status == "queued"
        assert await _until(counter.state, lambda s: s["processed"] == 3, 30) == {"value": 42, "processed": 3}

        doubler = client.get_or_create("request-response", ["localstack"])
        answer = await doubler.send("requests", {"value": 21}, wait=True, timeout=30)
        assert (answer.status, answer.response) == ("completed", {"doubled": 42})

        # A durable sleep of 3 s: the worker sends a delayed SQS message and LocalStack delivers it when due.
        reminders = client.get_or_create("reminder", ["localstack"])
        sent = time.time()
        due = datetime.fromtimestamp(sent + 3, UTC)
        await reminders.send("reminders", {"text": "soon", "at": due.isoformat()})
        await reminders.send("reminders", {"text": "past", "at": (due - timedelta(hours=1)).isoformat()})
        state = await _until(reminders.state, lambda s: s["fired"] == ["soon", "past"], 30)
        assert state == {"fired": ["soon", "past"]}
        assert time.time() - sent >= 3  # not fired early
