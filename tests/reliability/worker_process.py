"""`python -m tests.reliability.worker_process SETTINGS_JSON [MODULE:REGISTRY]`: the worker as `dormant dev` runs
it (pollers playing Lambda's event source for both queues, the worker handler), until it is killed. The registry
defaults to examples.counter's."""

from __future__ import annotations

import asyncio
import logging
import sys

from dormant.actor import Registry, load_registry
from dormant.aws.worker import open_worker
from dormant.dynamodb.table import client_config
from dormant.settings import Settings
from dormant.sqs.poller import SqsPoller


async def main(settings: Settings, registry: Registry) -> None:
    from aiobotocore.session import get_session  # type: ignore[import-untyped]

    async with open_worker(settings, registry) as worker, get_session().create_client(
            "sqs", config=client_config(), **settings.client_kwargs("sqs")) as sqs:
        assert settings.queue_url is not None and settings.timer_queue_url is not None
        pollers = [SqsPoller(sqs, url, worker.handle, wait_seconds=1, region=settings.region)
                   for url in (settings.queue_url, settings.timer_queue_url)]
        # Connected and warm before saying so (a Lambda container's init does this before its first event).
        warm = next(iter(registry.actors))
        await worker.service.store.exists(worker.service.ref(warm, ["warm-up"]))
        for poller in pollers:
            await worker.redelivery.queue(poller.arn)
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await asyncio.gather(*(poller.run() for poller in pollers))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("dormant.aws.worker").setLevel(logging.INFO)  # "refreshed ..." lines count in the report
    app = sys.argv[2] if len(sys.argv) > 2 else "examples.counter:registry"
    asyncio.run(main(Settings.model_validate_json(sys.argv[1]), load_registry(app)))
