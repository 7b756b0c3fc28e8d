"""The actor operations on AWS: an ActorService over the DynamoDB store and the SQS transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from dormant.actor import Registry
from dormant.aws.clients import open_clients
from dormant.dynamodb.store import DynamoEventStore
from dormant.runtime.clocks import SystemClock
from dormant.runtime.service import ActorService
from dormant.s3.blobs import S3Blobs
from dormant.settings import Settings
from dormant.sqs.transport import SqsTransport

API_ATTEMPTS = 3
API_CONNECT_TIMEOUT = 2.0
API_READ_TIMEOUT = 5.0


@asynccontextmanager
async def open_aws_service(registry: Registry, settings: Settings) -> AsyncIterator[ActorService]:
    """An ActorService on DynamoDB + SQS as the settings describe (clients closed on exit; made as
    `settings.aws_clients` says, dormant.aws.clients)."""
    clock = SystemClock()
    # Short timeouts and few retries: an unreachable service becomes a 503 in seconds, not a hung request.
    services = ["dynamodb", "sqs", *(["s3"] if settings.bucket else [])]  # S3: large values (docs/limits.md)
    async with open_clients(settings, *services, attempts=API_ATTEMPTS, connect_timeout=API_CONNECT_TIMEOUT,
                            read_timeout=API_READ_TIMEOUT) as clients:
        dynamodb, sqs = clients[:2]
        transport = await SqsTransport.from_settings(sqs, settings, clock)
        blobs = S3Blobs(clients[2], settings.bucket) if settings.bucket else None
        # Loads need not settle a crashed commit's side items: the actor's next commit (a wake-up, or an
        # action run here) does that.
        store = DynamoEventStore(dynamodb, settings, settle_on_load=False, clock=clock.now, blobs=blobs)
        yield ActorService(registry, store, transport, clock, public_url=settings.public_url)

