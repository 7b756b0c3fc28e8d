"""The actor operations on AWS: an ActorService over the DynamoDB store and the SQS transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from aiobotocore.session import get_session  # type: ignore[import-untyped]

from dormant.actor import Registry
from dormant.aws.store import DynamoEventStore, client_config
from dormant.aws.transport import SqsTransport
from dormant.runtime.clocks import SystemClock
from dormant.runtime.service import ActorService
from dormant.settings import Settings

API_ATTEMPTS = 3
API_CONNECT_TIMEOUT = 2.0
API_READ_TIMEOUT = 5.0


@asynccontextmanager
async def open_aws_service(registry: Registry, settings: Settings) -> AsyncIterator[ActorService]:
    """An ActorService on DynamoDB + SQS as the settings describe (clients closed on exit)."""
    clock = SystemClock()
    session = get_session()
    async with AsyncExitStack() as stack:
        # Short timeouts and few retries: an unreachable service becomes a 503 in seconds, not a hung request.
        config = client_config(attempts=API_ATTEMPTS, connect_timeout=API_CONNECT_TIMEOUT,
                               read_timeout=API_READ_TIMEOUT)
        dynamodb, sqs = [await stack.enter_async_context(session.create_client(
            service, config=config, **settings.client_kwargs(service))) for service in ("dynamodb", "sqs")]
        transport = await SqsTransport.from_settings(sqs, settings, clock)
        # Loads need not settle a crashed commit's side items: the actor's next commit (a wake-up, or an
        # action run here) does that.
        store = DynamoEventStore(dynamodb, settings, settle_on_load=False, clock=clock.now)
        yield ActorService(registry, store, transport, clock)

