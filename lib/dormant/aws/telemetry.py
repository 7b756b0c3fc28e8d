"""Logs and metrics for the Lambda functions, with aws-lambda-powertools (what AWS's Python field uses).

    telemetry = lambda_telemetry("dormant-worker")      # at import (init phase)
    @telemetry.handler                                   # request ids in every log line, metrics flushed
    def handler(event, context): ...

- **Logs**: powertools' `Logger` writes one JSON object per record to stdout (`level`, `message`,
  `timestamp`, `service`, `name`, `function_request_id`, `cold_start` on a container's first invocation, and every
  `extra` field; not powertools' `location`, function name, ARN and memory, which the log group and Lambda's own
  records already say, nor X-Ray's id, for bytes: CloudWatch Logs bills every one). Its handler is copied onto the
  `dormant` loggers, so the wake-up records of dormant.aws.observability (`actor`, `key`, `outcome`, `version`,
  `commits`, `consumed`, `duration_ms` ...) and the request records of dormant.http.access come out as JSON
  fields. Level: `DORMANT_LOG_LEVEL` (Settings.log_level), else `POWERTOOLS_LOG_LEVEL` (or Lambda's
  `AWS_LAMBDA_LOG_LEVEL`), default INFO; `DORMANT_LOG_DEBUG_SAMPLE` logs that share of invocations at DEBUG
  (powertools' `sampling_rate`, decided per invocation here).
  JSON escapes C0 controls; powertools leaves the rest of non-ASCII raw (readable accents), so C1 controls,
  DEL, bidi overrides and U+2028/U+2029 from keys or paths are written as four-hex-digit escapes too (\\u202e;
  dormant.core.safetext: the same JSON, nothing `aws logs tail` or a console shows reordered or acts on).
- **Metrics**: powertools' `Metrics` writes CloudWatch embedded-metric-format documents to stdout at the
  end of each invocation (one document for all its wake-ups: a metric's values are a list); CloudWatch Logs
  turns them into metrics (namespace `DORMANT_METRICS_NAMESPACE`,
  default "Dormant"; dimension `service`), no API call and no extra latency.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

from dormant.aws.observability import Observer, WakeRecord
from dormant.core.safetext import json_text

if TYPE_CHECKING:
    from dormant.settings import Settings

H = TypeVar("H", bound=Callable[..., Any])
DEFAULT_NAMESPACE = "Dormant"
CONTEXT_FIELDS = ("function_name", "memory_limit_in_mb", "invoked_function_arn", "aws_request_id")
DROPPED_KEYS = ("location", "xray_trace_id")  # powertools' defaults a record here need not carry (bytes are billed)
RECORD_KEYS_LEFT_OUT = ("taskName",)
"""Record attributes powertools would copy into every line: Python 3.12+ (Lambda's 3.13) names the asyncio task a
record was logged in, and every wake-up runs in one."""


class EmfMetrics:
    """MetricsSink: one set of CloudWatch metrics per wake-up, flushed with the invocation."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def wake(self, record: WakeRecord) -> None:
        add = self.metrics.add_metric
        add(name="WakeUps", unit=MetricUnit.Count, value=1)
        if record.error is not None:
            add(name="WakeUpErrors", unit=MetricUnit.Count, value=1)
        if record.dead_letter:
            add(name="DeadLettered", unit=MetricUnit.Count, value=record.messages)
        for name, value in (("Steps", record.steps), ("Commits", record.commits), ("StepRetries", record.retries),
                            ("VersionConflicts", record.conflicts), ("MessagesConsumed", record.consumed),
                            ("StepsThrottled", record.throttled)):
            if value:
                add(name=name, unit=MetricUnit.Count, value=value)
        add(name="WakeUpDuration", unit=MetricUnit.Milliseconds, value=record.duration_ms)
        if record.latency_ms is not None:
            add(name="WakeUpLatency", unit=MetricUnit.Milliseconds, value=record.latency_ms)

    def skipped(self, messages: int) -> None:
        self.metrics.add_metric(name="WakeUpsSkipped", unit=MetricUnit.Count, value=messages)

    def flush(self) -> None:
        self.metrics.flush_metrics()


@dataclass
class LambdaTelemetry:
    logger: Logger
    metrics: Metrics
    observer: Observer
    debug_sample: float = 0.0  # share of invocations logged at DEBUG (Settings.log_debug_sample)
    sampler: Callable[[], float] = random.random  # [0, 1): a test gives a seeded or fixed one
    cold: bool = field(default=True, init=False)

    def handler(self, fn: H) -> H:
        """Decorate the Lambda handler: request id in log lines, sampled DEBUG, metrics flushed at the end."""
        dormant = logging.getLogger("dormant")

        @functools.wraps(fn)
        def wrapped(event: Any, context: Any) -> Any:
            level = dormant.level
            if self.debug_sample > 0 and self.sampler() < self.debug_sample:
                dormant.setLevel(logging.DEBUG)  # this invocation only
            if all(hasattr(context, name) for name in CONTEXT_FIELDS):  # not a test's or local caller's
                self.logger.append_keys(function_request_id=context.aws_request_id,
                                        cold_start=True if self.cold else None)
            self.cold = False
            try:
                return fn(event, context)
            finally:
                self.logger.remove_keys(["function_request_id", "cold_start"])
                dormant.setLevel(level)
                if self.metrics.metric_set:  # nothing measured (an API call): no empty document
                    self.metrics.flush_metrics()

        return wrapped  # type: ignore[return-value]


def log_json(record: dict[str, Any]) -> str:
    """powertools' serializer (compact, `str()` for the rest, non-ASCII kept), terminal controls escaped; without
    RECORD_KEYS_LEFT_OUT."""
    for key in RECORD_KEYS_LEFT_OUT:
        record.pop(key, None)
    return json_text(json.dumps(record, default=str, separators=(",", ":"), ensure_ascii=False))


def lambda_telemetry(service: str, *, namespace: str | None = None, settings: Settings | None = None,
                     sampler: Callable[[], float] = random.random) -> LambdaTelemetry:
    """JSON logs for `dormant.*` and an EMF metrics sink, for one Lambda function; levels and sampling from
    `settings` (log_level, log_debug_sample)."""
    logger = Logger(service=service, json_serializer=log_json)
    logger.remove_keys(list(DROPPED_KEYS))
    logging.getLogger("dormant")  # exists before the copy (it only reaches registered loggers)
    level = settings.log_level if settings is not None else None
    copy_config_to_registered_loggers(source_logger=logger, include={"dormant"}, log_level=level)
    metrics = Metrics(namespace=namespace or os.environ.get("DORMANT_METRICS_NAMESPACE", DEFAULT_NAMESPACE),
                      service=service)
    return LambdaTelemetry(logger=logger, metrics=metrics, observer=Observer(EmfMetrics(metrics)),
                           debug_sample=settings.log_debug_sample if settings is not None else 0.0, sampler=sampler)
