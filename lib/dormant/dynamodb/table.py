"""The table's definition: the one source for tests, `dormant dev`, template.yaml and infra/ (the deploy
tests compare them)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from botocore.exceptions import ClientError  # type: ignore[import-untyped]

from dormant.dynamodb.keys import PENDING_INDEX, SEARCH_INDEX, STATUS_INDEX
from dormant.errors import StorageError
from dormant.settings import Settings

__all__ = ["PENDING_INDEX", "SEARCH_INDEX", "STATUS_INDEX", "TTL_ATTRIBUTE", "client_config", "create_table",
           "table_definition"]

log = logging.getLogger(__name__)

TTL_ATTRIBUTE = "expires_at"  # epoch seconds: DynamoDB deletes the item some time after


def table_definition(name: str) -> dict[str, Any]:
    """CreateTable arguments for the store's table (shared by tests, `dormant dev` and template.yaml).

    TTL is switched on separately (UpdateTimeToLive on attribute `TTL_ATTRIBUTE`). `pending` (local) holds
    the inbox in send order; `status` (global) lists actors by type and status (dormant.dynamodb.listing); `search`
    (global) finds them by their search attributes (dormant.dynamodb.search)."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": attr, "AttributeType": "S"}
                                 for attr in ("pk", "sk", "pq", "lt", "ls", "xk", "xv")],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "LocalSecondaryIndexes": [{
            "IndexName": PENDING_INDEX,
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "pq", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "ALL"},
        }],
        "GlobalSecondaryIndexes": [{
            "IndexName": STATUS_INDEX,
            "KeySchema": [{"AttributeName": "lt", "KeyType": "HASH"}, {"AttributeName": "ls", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "ALL"},
        }, {
            "IndexName": SEARCH_INDEX,
            "KeySchema": [{"AttributeName": "xk", "KeyType": "HASH"}, {"AttributeName": "xv", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "ALL"},
        }],
    }


async def _active(client: Any, name: str, deadline: float, timeout: float) -> dict[str, Any]:
    """The table's description once it and its global indexes are ACTIVE."""
    while True:
        table: dict[str, Any] = (await client.describe_table(TableName=name))["Table"]
        if table["TableStatus"] == "ACTIVE" and all(index.get("IndexStatus", "ACTIVE") == "ACTIVE"
                                                    for index in table.get("GlobalSecondaryIndexes", [])):
            return table
        if time.monotonic() > deadline:
            raise StorageError(f"table {name} did not become ACTIVE within {timeout} s")
        await asyncio.sleep(0.1)


def client_config(*, attempts: int = 4, connect_timeout: float = 5, read_timeout: float = 30) -> Any:
    """An aiobotocore client's config with `client_options` (dormant.core.clients): retries with backoff on
    throttling and 5xx, never on conditional failures. For code that makes its own aiobotocore clients."""
    from aiobotocore.config import AioConfig  # type: ignore[import-untyped]

    from dormant.core.clients import client_options

    return AioConfig(**client_options(attempts=attempts, connect_timeout=connect_timeout, read_timeout=read_timeout))


async def create_table(client: Any, settings: Settings | str, *, timeout: float = 30.0) -> None:
    """Create the table if missing, wait until it is ACTIVE and switch TTL on (where the server can). A table made
    by an earlier release (a `dormant dev` data directory) gets the global indexes it lacks, one at a time, as a
    deployment's stack update adds them."""
    name = settings if isinstance(settings, str) else settings.table
    try:
        await client.create_table(**table_definition(name))
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ResourceInUseException":
            raise
    deadline = time.monotonic() + timeout
    table = await _active(client, name, deadline, timeout)
    definition = table_definition(name)
    present = {index["IndexName"] for index in table.get("GlobalSecondaryIndexes", [])}
    for index in definition["GlobalSecondaryIndexes"]:
        if index["IndexName"] in present:
            continue
        log.info("table %s has no %s index yet: adding it", name, index["IndexName"])
        await client.update_table(TableName=name, AttributeDefinitions=definition["AttributeDefinitions"],
                                  GlobalSecondaryIndexUpdates=[{"Create": index}])
        await _active(client, name, deadline, timeout)
    try:
        await client.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE})
    except ClientError as error:  # dynalite has no TTL: expired items are filtered on read anyway
        log.info("TTL not enabled on %s: %s", name, error)
