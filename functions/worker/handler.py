"""Worker Lambda: an SQS batch of wake-up messages -> actor wake-ups -> partial batch failures.

Configured by environment: DORMANT_APP=module:attribute (the registry) and the DORMANT_* settings.
The logic lives in dormant.aws.worker; this module only keeps one worker per Lambda container.
"""

from __future__ import annotations

from typing import Any

from dormant.aws.worker import LambdaWorker

worker = LambdaWorker()


def handler(event: dict[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    return worker(event, context)
