"""What an S3 request changed in the embedded moto server, as journal records, and those records applied again.

As for DynamoDB (dormant.dev.persistence), the journal holds post-images, not requests: hooks on moto's S3 backend
record which object names and which multipart uploads a request touched (every object write goes through one of
the backend methods in `KEY_METHODS` or `UPLOAD_METHODS`: single puts, copies, batch deletes, multipart uploads,
tags, ACLs, retention), and after the request each touched name is journaled as it is now: all its versions (the
keys, with their values in object files: dormant.dev.objectfiles) and their tags, or nothing if it is gone; each
touched upload as its parts, or nothing. Bucket-level changes (create, delete, lifecycle, policy, ...) are not
described by the journal: the gate compacts after them, as after table- and queue-level changes.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any

# backend method -> (its bucket argument, its object-name argument)
KEY_METHODS = {
    "put_object": ("bucket_name", "key_name"), "put_object_acl": ("bucket_name", "key_name"),
    "put_object_legal_hold": ("bucket_name", "key_name"), "put_object_retention": ("bucket_name", "key_name"),
    "delete_object": ("bucket_name", "key_name"), "delete_object_tagging": ("bucket_name", "key_name"),
    "restore_object": ("bucket_name", "key_name"), "copy_object": ("dest_bucket_name", "dest_key_name"),
    "put_object_tagging": ("key", "key"),  # takes the FakeKey itself
}
# backend method -> (its bucket argument, its upload-id argument; None: the id of the upload it returns)
UPLOAD_METHODS = {
    "create_multipart_upload": ("bucket_name", None), "upload_part": ("bucket_name", "multipart_id"),
    "upload_part_copy": ("dest_bucket_name", "multipart_id"),
    "complete_multipart_upload": ("bucket_name", "multipart_id"),
    "abort_multipart_upload": ("bucket_name", "multipart_id"),
}
Touch = tuple[str, str, str, str, str]  # ("key" | "upload", account, partition, bucket, name or upload id)


def _backends() -> Any:
    from moto.s3.models import s3_backends

    return s3_backends


class S3Touched:
    """The object names and uploads written by the S3 request in progress (one request per thread)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def start(self) -> None:
        self._local.touched = {}  # (a dict: ordered, and a batch delete of 1,000 names stays linear)

    def add(self, touch: Touch) -> None:
        touched = getattr(self._local, "touched", None)
        if touched is not None:
            touched[touch] = None

    def take(self) -> list[Touch]:
        touched: dict[Touch, None] = getattr(self._local, "touched", None) or {}
        self._local.touched = None
        return list(touched)


def install_hooks(touched: S3Touched) -> None:
    """Wrap the backend methods that write objects so each records what it touched (also when it raises: a batch
    delete may fail half-way)."""
    from moto.s3.models import S3Backend

    if getattr(S3Backend, "_dormant_hooked", False):
        return
    for method_name, (bucket_argument, name_argument) in KEY_METHODS.items():
        _wrap(S3Backend, method_name, touched, "key", bucket_argument, name_argument)
    for method_name, (bucket_argument, upload_argument) in UPLOAD_METHODS.items():
        _wrap(S3Backend, method_name, touched, "upload", bucket_argument, upload_argument)
    S3Backend._dormant_hooked = True  # type: ignore[attr-defined]


def _wrap(backend_class: type[Any], method_name: str, touched: S3Touched, kind: str, bucket_argument: str,
          name_argument: str | None) -> None:
    original: Callable[..., Any] = getattr(backend_class, method_name)
    signature = inspect.signature(original)

    @functools.wraps(original)
    def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = None
        try:
            result = original(self, *args, **kwargs)
            return result
        finally:
            try:
                arguments = signature.bind(self, *args, **kwargs).arguments
            except TypeError:  # not a call moto's own code makes; nothing was written
                arguments = {}
            bucket, name = arguments.get(bucket_argument), None
            if bucket_argument == "key" and bucket is not None:  # put_object_tagging(key, tags)
                bucket, name = bucket.bucket_name, bucket.name
            elif name_argument is not None:
                name = arguments.get(name_argument)
            elif result is not None:  # create_multipart_upload: the new upload
                name = result.id
            if isinstance(bucket, str) and isinstance(name, str):
                touched.add((kind, self.account_id, self.region_name, bucket, name))

    setattr(backend_class, method_name, hooked)


def post_images(touched: list[Touch]) -> list[tuple[Any, ...]]:
    """A journal record per touched name or upload: what it is now."""
    records: list[tuple[Any, ...]] = []
    backends = _backends()
    for kind, account, partition, bucket_name, name in touched:
        backend = backends[account][partition]
        bucket = backend.buckets.get(bucket_name)
        if bucket is None:
            continue
        if kind == "key":
            versions = list(bucket.keys.getlist(name, []))
            tags = {arn: dict(backend.tagger.tags[arn]) for arn in _arns(versions) if arn in backend.tagger.tags}
            records.append(("s3key", account, partition, bucket_name, name, versions, tags))
        else:
            records.append(("s3upload", account, partition, bucket_name, name, bucket.multiparts.get(name)))
    return records


def apply(record: tuple[Any, ...]) -> None:
    """Put a post-image back (replaying the journal at start)."""
    kind, account, partition, bucket_name, name = record[:5]
    backend = _backends()[account][partition]
    bucket = backend.buckets.get(bucket_name)
    if bucket is None:  # the bucket went later (its deletion is in the next snapshot)
        return
    if kind == "s3key":
        versions, tags = record[5], record[6]
        for arn in _arns(bucket.keys.getlist(name, [])):
            backend.tagger.tags.pop(arn, None)
        if versions:
            bucket.keys.setlist(name, versions)  # disposes of the versions it replaces
        elif dict.__contains__(bucket.keys, name):
            bucket.keys.pop(name)
        backend.tagger.tags.update({arn: dict(values) for arn, values in tags.items()})
    elif kind == "s3upload":
        upload = record[5]
        if name in bucket.multiparts:
            del bucket.multiparts[name]  # disposes of its parts
        if upload is not None:
            bucket.multiparts[name] = upload


def _arns(versions: list[Any]) -> list[str]:
    return [version.arn for version in versions if hasattr(version, "arn") and hasattr(version, "bucket_name")]


# -- snapshots -------------------------------------------------------------------------------------------------
def snapshot_state() -> dict[tuple[str, str], dict[str, Any]]:
    """Everything of S3 a snapshot keeps, per (account, partition)."""
    return {(account, partition): {"buckets": backend.buckets, "tagger": backend.tagger,
                                   "inventory_configs": backend.inventory_configs}
            for account, partition, backend in _existing()}


def load_state(state: dict[tuple[str, str], dict[str, Any]]) -> None:
    backends = _backends()
    for (account, partition), saved in state.items():
        backend = backends[account][partition]
        backend.buckets = saved["buckets"]
        backend.tagger = saved["tagger"]
        backend.inventory_configs = saved["inventory_configs"]
        for name, bucket in backend.buckets.items():  # moto's global bucket namespace
            backends.bucket_accounts[name] = (bucket.partition, account)


def _existing() -> Iterator[tuple[str, str, Any]]:
    for account, partitions in dict.items(_backends()):
        for partition, backend in dict.items(partitions):
            yield account, partition, backend


def counts() -> tuple[int, int]:
    """(buckets, objects) in moto's S3 now (every version of every name counted)."""
    buckets = objects = 0
    for _, _, backend in _existing():
        buckets += len(backend.buckets)
        objects += sum(len(versions) for bucket in backend.buckets.values() for _, versions in bucket.keys.lists())
    return buckets, objects


def live_keys() -> Iterator[tuple[Any, Callable[[], None]]]:
    """Every key holding a value moto may still read, with a function that removes it (where it lives: a name's
    versions, a delete marker, an upload's parts)."""
    for _, _, backend in _existing():
        for bucket in backend.buckets.values():
            for name, versions in bucket.keys.lists():
                for version in versions:
                    key = getattr(version, "key", version)  # a delete marker holds the key it hides
                    if getattr(key, "disposed", True) is False:
                        yield key, functools.partial(_remove_version, bucket, name, version)
            for upload_id, upload in list(bucket.multiparts.items()):
                for part in upload.parts.values():
                    if part.disposed is False:
                        yield part, functools.partial(_remove_upload, bucket, upload_id)


def _remove_version(bucket: Any, name: str, version: Any) -> None:
    versions = [v for v in bucket.keys.getlist(name, []) if v is not version]
    if versions:
        bucket.keys.setlist(name, versions)
    elif dict.__contains__(bucket.keys, name):
        dict.pop(bucket.keys, name)  # (moto's pop would dispose of the removed version again)


def _remove_upload(bucket: Any, upload_id: str) -> None:
    if upload_id in bucket.multiparts:
        dict.pop(bucket.multiparts, upload_id)


def check_files(exists: Callable[[str, int], bool]) -> tuple[set[str], list[str]]:
    """After a restore: (the object files live keys read, the objects dropped because their file is missing or
    short). Only a power cut can leave such a file (its journal record was written, its bytes were not)."""
    from dormant.dev.objectfiles import ATTRIBUTE

    used: set[str] = set()
    dropped: list[str] = []
    for key, remove in list(live_keys()):
        stored = getattr(key, ATTRIBUTE, None)
        if stored is None:
            continue  # not yet pickled: its value is still in moto's own buffer
        if exists(*stored):
            used.add(stored[0])
        else:
            remove()
            dropped.append(f"s3://{key.bucket_name}/{key.name}")
    return used, dropped
