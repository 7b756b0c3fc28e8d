"""An independent check of an actor table against its bucket (no store code): which S3 objects the items a reader can
load refer to, and whether they are all there (issue 26: a shared large value was deleted while referred to).
Used by the offload lifecycle's property test, the kill -9 run with repeated large bodies and the repro of 26.1."""

from __future__ import annotations

import re
import zlib
from typing import Any

REFERENCE = re.compile(r'"__dormant_blob__":\s*"([^"]+)"')


async def scan(client: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = await client.scan(**kwargs)
        items += page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


async def listing(client: Any, bucket: str) -> set[str]:
    keys: set[str] = set()
    kwargs: dict[str, Any] = {"Bucket": bucket}
    while True:
        page = await client.list_objects_v2(**kwargs)
        keys.update(item["Key"] for item in page.get("Contents", []))
        if not page.get("IsTruncated"):
            return keys
        kwargs["ContinuationToken"] = page["NextContinuationToken"]


def readable_references(items: list[dict[str, Any]]) -> tuple[dict[str, str], set[str]]:
    """(key -> where, for every reference an item a reader can load holds; the keys the ring's commits release).
    Read from the raw items: the live incarnation's commits (slot 0's `c`), pending inbox items, responses and
    events."""
    anchor = next((item for item in items if item["sk"]["S"] == "c#000" and "gone" not in item), None)
    incarnation = anchor.get("c", {}).get("S") if anchor is not None else None
    found: dict[str, str] = {}
    released: set[str] = set()
    for item in items:
        sk = item["sk"]["S"]
        texts: list[str] = []
        if sk.startswith("c#"):
            if incarnation is None or item.get("c", {}).get("S") != incarnation or "z" not in item:
                continue
            texts.append(zlib.decompress(item["z"]["B"]).decode())
            released.update(item.get("r", {}).get("SS", []))
        elif sk.startswith("i#") and "m" in item:
            texts.append(item["m"]["S"])
        elif sk.startswith(("r#", "e#")) and "d" in item:
            texts.append(item["d"]["S"])
        for text in texts:
            for key in REFERENCE.findall(text):
                found.setdefault(key, sk)
    return found, released


async def parts(s3: Any, bucket: str, keys: Any, objects: set[str], *, must: bool) -> set[str]:
    """`keys` and every object they name, transitively; with `must`, AssertionError if a named one is missing."""
    wanted, seen = list(keys), set(keys)
    while wanted:
        key = wanted.pop()
        if key not in objects:
            continue
        body = await (await s3.get_object(Bucket=bucket, Key=key))["Body"].read()
        for part in REFERENCE.findall(body.decode()):
            assert part in objects or not must, f"object {key} refers to {part}, which is not in the bucket"
            if part not in seen:
                seen.add(part)
                wanted.append(part)
    return seen


async def dangling(dynamodb: Any, s3: Any, table: str, bucket: str) -> dict[str, str]:
    """key -> where, of every reference (in an item a reader can load, or inside an object one names) to an object
    that is not in the bucket."""
    references, _ = readable_references(await scan(dynamodb, table))
    objects = await listing(s3, bucket)
    missing = {key: where for key, where in references.items() if key not in objects}
    try:
        await parts(s3, bucket, [key for key in references if key in objects], objects, must=True)
    except AssertionError as error:
        missing["(inside an object)"] = str(error)
    return missing
