"""The S3 side of large values: objects put, read (concurrently, through a bounded cache), listed and deleted.

Objects are content-addressed (dormant.s3.offload), so a cached object never changes: a warm Lambda container
or `dormant dev` reads a big state from S3 once, not once per wake-up. Errors become StorageError (the
infrastructure's: retried), except a missing object, which is `BlobMissing` (a reader of an old version looks
again: the newest version never refers to a deleted object).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from dormant.errors import StorageError

CACHE_BYTES = 64 * 1024 * 1024
CONCURRENCY = 16  # S3 requests one load makes at once
_DELETE_BATCH = 1000  # DeleteObjects' limit


class BlobMissing(StorageError):
    """An object a reference names is not in the bucket (deleted after the version that named it)."""


@dataclass(frozen=True)
class Listed:
    key: str
    size: int
    modified: float  # epoch seconds


class S3Blobs:
    """Objects of one bucket, through any client with aiobotocore's face (`await client.put_object(...)`)."""

    def __init__(self, client: Any, bucket: str, *, cache_bytes: int = CACHE_BYTES) -> None:
        self.client = client
        self.bucket = bucket
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cached_bytes = 0
        self._cache_limit = cache_bytes
        self._gate = asyncio.Semaphore(CONCURRENCY)

    async def put_many(self, objects: dict[str, bytes]) -> None:
        """Write `objects` (key -> bytes), concurrently; each is readable once this returns."""
        await asyncio.gather(*(self._put(key, data) for key, data in objects.items()))

    async def _put(self, key: str, data: bytes) -> None:
        async with self._gate:
            await self._call("PutObject", Bucket=self.bucket, Key=key, Body=data,
                             ContentType="application/json")
        self._remember(key, data)

    async def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """key -> bytes for every key, from the cache or S3 (concurrently). BlobMissing if one is not there."""
        wanted = list(dict.fromkeys(keys))
        found = {key: self._cache[key] for key in wanted if key in self._cache}
        for key in found:
            self._cache.move_to_end(key)
        missing = [key for key in wanted if key not in found]
        fetched = await asyncio.gather(*(self._get(key) for key in missing))
        found.update(zip(missing, fetched, strict=True))
        return found

    async def _get(self, key: str) -> bytes:
        async with self._gate:
            response = await self._call("GetObject", Bucket=self.bucket, Key=key)
            body = response["Body"]
            if inspect.iscoroutinefunction(body.read):  # aiobotocore's stream
                data: bytes = await body.read()
            else:  # botocore's (the threads kind): read in a thread, never on the event loop
                data = await asyncio.to_thread(body.read)
            close = getattr(body, "close", None)
            if callable(close):
                close()
        self._remember(key, data)
        return data

    async def list(self, prefix: str) -> list[Listed]:
        """Every object under `prefix` (pages of 1,000 followed)."""
        found: list[Listed] = []
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        while True:
            response = await self._call("ListObjectsV2", **kwargs)
            for item in response.get("Contents", []):
                modified = item.get("LastModified")
                found.append(Listed(str(item["Key"]), int(item.get("Size", 0)),
                                    modified.timestamp() if modified is not None else time.time()))
            token = response.get("NextContinuationToken")
            if not response.get("IsTruncated") or not token:
                return found
            kwargs["ContinuationToken"] = token

    async def delete_many(self, keys: Iterable[str]) -> None:
        """Delete `keys` (missing ones are fine), in batches of 1,000; raises StorageError if any stayed."""
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _DELETE_BATCH):
            batch = unique[start:start + _DELETE_BATCH]
            response = await self._call("DeleteObjects", Bucket=self.bucket,
                                        Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True})
            errors = response.get("Errors") or []
            if errors:
                raise StorageError(f"S3 DeleteObjects on {self.bucket} left {len(errors)} object(s): "
                                   f"{errors[0].get('Code', '?')}")
        for key in unique:
            data = self._cache.pop(key, None)
            if data is not None:
                self._cached_bytes -= len(data)

    def _remember(self, key: str, data: bytes) -> None:
        if len(data) > self._cache_limit // 2:  # a huge value would push out everything else
            return
        if key not in self._cache:
            self._cache[key] = data
            self._cached_bytes += len(data)
        self._cache.move_to_end(key)
        while self._cached_bytes > self._cache_limit and self._cache:
            _, dropped = self._cache.popitem(last=False)
            self._cached_bytes -= len(dropped)

    async def _call(self, operation: str, **kwargs: Any) -> Any:
        method = getattr(self.client, _SNAKE[operation])
        try:
            return await method(**kwargs)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404") and operation == "GetObject":
                raise BlobMissing(f"S3 object {kwargs.get('Key')} is not in bucket {self.bucket}") from None
            raise StorageError(f"S3 {operation} on {self.bucket} failed: {code}") from error
        except BotoCoreError as error:
            raise StorageError(f"S3 {operation} on {self.bucket} failed: {type(error).__name__}") from error


_SNAKE = {"PutObject": "put_object", "GetObject": "get_object", "ListObjectsV2": "list_objects_v2",
          "DeleteObjects": "delete_objects"}
