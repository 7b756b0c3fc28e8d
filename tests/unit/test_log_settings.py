"""The log settings (Settings.log_level, log_debug_sample, request_log_sample, request_log_slow_ms): validated, and
honoured by the request line's sampling (dormant.http.access) and the functions' DEBUG sampling
(dormant.aws.telemetry), with seeded or forced samplers."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from dormant.aws.telemetry import lambda_telemetry
from dormant.http.access import AccessLog
from dormant.settings import Settings


def test_the_log_settings_come_from_dormant_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DORMANT_LOG_LEVEL", "warn")
    monkeypatch.setenv("DORMANT_LOG_DEBUG_SAMPLE", "0.25")
    monkeypatch.setenv("DORMANT_REQUEST_LOG_SAMPLE", "0.1")
    monkeypatch.setenv("DORMANT_REQUEST_LOG_SLOW_MS", "250")
    settings = Settings()
    assert (settings.log_level, settings.log_debug_sample) == ("WARNING", 0.25)
    assert (settings.request_log_sample, settings.request_log_slow_ms) == (0.1, 250.0)
    for name in ("DORMANT_LOG_LEVEL", "DORMANT_LOG_DEBUG_SAMPLE", "DORMANT_REQUEST_LOG_SAMPLE"):
        monkeypatch.delenv(name)
    defaults = Settings()
    assert (defaults.log_level, defaults.log_debug_sample, defaults.request_log_sample) == (None, 0.0, None)


@pytest.mark.parametrize(("field", "value", "says"), [
    ("log_level", "loud", "must be DEBUG, INFO, WARNING or ERROR, not 'loud'"),
    ("log_level", 5, "log_level"),
    ("log_debug_sample", 1.5, "less than or equal to 1"),
    ("request_log_sample", -0.1, "greater than or equal to 0"),
    ("request_log_sample", "often", "request_log_sample"),
    ("request_log_slow_ms", 0, "greater than 0"),
])
def test_a_bad_log_setting_is_refused_naming_it(field: str, value: Any, says: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(**{field: value})
    assert field in str(refused.value) and says in str(refused.value)


def _app_answering(status: int) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})
    return app


async def _request(access: AccessLog, path: str = "/actors/counter/k/state") -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        return None

    await access({"type": "http", "method": "GET", "path": path}, receive, send)


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger = logging.getLogger("tests.access")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = Keep()
    logger.addHandler(handler)
    yield seen
    logger.removeHandler(handler)


async def test_successful_requests_are_logged_as_a_seeded_sampler_draws(records: list[logging.LogRecord]) -> None:
    access = AccessLog(_app_answering(200), logging.getLogger("tests.access"), sample=0.3,
                       sampler=random.Random(7).random)
    for _ in range(40):
        await _request(access)
    replay = random.Random(7)
    assert len(records) == sum(1 for _ in range(40) if replay.random() < 0.3)
    assert 0 < len(records) < 40  # the seed draws both ways: the test can tell sampling from all or nothing


async def test_errors_and_slow_requests_are_always_logged(records: list[logging.LogRecord]) -> None:
    never = AccessLog(_app_answering(200), logging.getLogger("tests.access"), sample=0.0, sampler=lambda: 0.0)
    await _request(never)
    assert records == []
    for status in (400, 404, 429, 500, 503):
        await _request(AccessLog(_app_answering(status), logging.getLogger("tests.access"), sample=0.0))
    assert [r.http["status"] for r in records] == [400, 404, 429, 500, 503]  # type: ignore[attr-defined]
    assert records[-1].levelno == logging.ERROR and records[0].levelno == logging.INFO
    slow = AccessLog(_app_answering(200), logging.getLogger("tests.access"), sample=0.0, slow_ms=1e-9)
    await _request(slow)
    assert len(records) == 6 and records[-1].http["status"] == 200  # type: ignore[attr-defined]
    everything = AccessLog(_app_answering(200), logging.getLogger("tests.access"), sample=1.0,
                           sampler=lambda: 0.999)
    await _request(everything)
    assert len(records) == 7


def test_an_invocation_drawn_by_the_debug_sampler_logs_at_debug_and_the_next_does_not() -> None:
    draws = iter([0.1, 0.9])  # a forced sampler: the first invocation is drawn (0.1 < 0.5), the second is not
    telemetry = lambda_telemetry("dormant-test-sampling", settings=Settings(log_level="INFO", log_debug_sample=0.5),
                                 sampler=lambda: next(draws))
    dormant = logging.getLogger("dormant")
    seen: list[bool] = []

    @telemetry.handler
    def handler(event: Any, context: Any) -> None:
        seen.append(logging.getLogger("dormant.wake").isEnabledFor(logging.DEBUG))

    try:
        handler({}, None)
        handler({}, None)
        assert seen == [True, False]
        assert dormant.level == logging.INFO  # restored after each invocation
    finally:
        dormant.handlers.clear()
        dormant.setLevel(logging.NOTSET)
        dormant.propagate = True


def test_a_line_leaves_out_the_asyncio_task_name() -> None:
    """Python 3.12+ (Lambda's 3.13) names the task a record was logged in; every wake-up runs in one: bytes billed
    on every line for nothing an operator reads."""
    from dormant.aws.telemetry import log_json

    line = json.loads(log_json({"level": "INFO", "message": "woke", "taskName": "Task-5", "actor": "a"}))
    assert line == {"level": "INFO", "message": "woke", "actor": "a"}
