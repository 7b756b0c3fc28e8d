"""Repro of issue 26.1 (temporary)."""
from __future__ import annotations

import re
import zlib
from typing import Any

import pytest

from dormant.settings import Settings
from tests.aws_env import AwsTestEnv
from tests.large_app import registry

KEY = re.compile(r'"__dormant_blob__":"([^"]+)"')


@pytest.fixture(params=["dynamodb_local", "moto"])
def endpoints(request: pytest.FixtureRequest) -> dict[str, str]:
    sqs = request.getfixturevalue("moto_server")
    dynamodb = request.getfixturevalue("dynamodb_local_server") if request.param == "dynamodb_local" else sqs
    return {"endpoint_url": sqs, "dynamodb_endpoint_url": dynamodb}


async def references(env: AwsTestEnv) -> dict[str, list[str]]:
    client = env.store.client  # type: ignore[attr-defined]
    found: dict[str, list[str]] = {}
    kwargs: dict[str, Any] = {"TableName": env.settings.table}
    while True:
        page = await client.scan(**kwargs)
        for item in page.get("Items", []):
            texts = [value["S"] for value in item.values() if "S" in value]
            if "z" in item:
                texts.append(zlib.decompress(item["z"]["B"]).decode())
            for text in texts:
                for key in KEY.findall(text):
                    found.setdefault(key, []).append(item["sk"]["S"])
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


async def bucket(env: AwsTestEnv) -> set[str]:
    keys: set[str] = set()
    kwargs: dict[str, Any] = {"Bucket": env.settings.bucket}
    while True:
        page = await env.s3.list_objects_v2(**kwargs)
        keys.update(item["Key"] for item in page.get("Contents", []))
        if not page.get("IsTruncated"):
            return keys
        kwargs["ContinuationToken"] = page["NextContinuationToken"]


async def test_two_messages_with_one_large_value(endpoints: dict[str, str]) -> None:
    async with AwsTestEnv(registry, settings=Settings(**endpoints, snapshot_every=4)) as env:
        handle = env.client.get_or_create("large-notebook", ["shared"])
        await handle.send("append", {"kb": 0})
        await env.run_until_idle()
        await handle.pause()
        text = "j" * 100_000
        await handle.send("echo", {"text": text})
        for _ in range(20):
            await handle.send("append", {"kb": 0})
        await handle.send("echo", {"text": text})
        await handle.send("append", {"kb": 0})
        await handle.unpause()
        await env.run_until_idle()
        refs, objects = await references(env), await bucket(env)
        dangling = {key: where for key, where in refs.items() if key not in objects}
        assert not dangling
        await handle.send("append", {"kb": 0})
        await env.run_until_idle()
        state = await handle.state()
        assert len(state.digests) == 2 and len(state.chunks) == 23
