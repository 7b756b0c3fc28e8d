"""Worker Lambda: an SQS batch of wake-up messages -> actor wake-ups -> partial batch failures.

Configured by environment: DORMANT_APP=module:attribute (the registry) and the DORMANT_* settings.
The logic lives in dormant.aws.worker; this module keeps one worker per Lambda container and gives it
JSON logs and EMF metrics (dormant.aws.telemetry): a log record and a set of metrics per wake-up.
"""

from __future__ import annotations

from typing import Any

from dormant.aws.clients import function_settings
from dormant.aws.telemetry import lambda_telemetry
from dormant.aws.worker import LambdaWorker

# botocore's clients in threads: no aiobotocore and aiohttp to import at a cold start (dormant.aws.clients)
settings = function_settings()
telemetry = lambda_telemetry("dormant-worker", settings=settings)
worker = LambdaWorker(settings=settings, observer=telemetry.observer)
worker.prepare()  # imports, session and clients in the init phase (kept by a SnapStart snapshot)


@telemetry.handler
def handler(event: dict[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    return worker(event, context)
