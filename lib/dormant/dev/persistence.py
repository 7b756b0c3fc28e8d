"""Durable state for the embedded moto server: a snapshot plus a write-ahead journal in a data directory.

moto keeps everything in memory. `dormant dev` keeps it across restarts like this:

- `snapshot-<G>.pickle` holds moto's DynamoDB tables, SQS queues and S3 buckets at generation G (written to a
  temporary file, fsynced and renamed into place, so a crash leaves either the old or the new snapshot, never
  half of one);
- `journal-<G>.log` holds, in order, what every request changed since that snapshot: the item after each
  DynamoDB write (its post-image, or its deletion), each SQS message added or removed, and each S3 object name
  or multipart upload a request wrote, as it is after the request (dormant.dev.s3journal). A record is one
  framed `write()` (length, CRC-32, pickle) appended before the response is sent, so everything
  acknowledged survives a kill -9 of the server; a torn last record (power loss) fails its CRC and is ignored.
- `objects/`: the S3 objects' bytes, one file per object, which the snapshot and the journal name
  (dormant.dev.objectfiles): a 20 MB object makes no snapshot or journal record bigger.
- Start: load the newest snapshot, replay its journal, delete older generations and object files nothing
  refers to. Compaction (a new snapshot, an empty journal of the next generation) happens when the journal passes
  `compact_bytes`, when `compact_bytes` x OBJECT_BYTES_PER_JOURNAL_BYTE of object bytes were written (to delete
  the files of objects deleted since) and after table-, queue- and bucket-level changes (create, delete,
  attributes, lifecycle...), which the journal does not describe.

Post-images rather than requests: replaying a post-image is idempotent and needs no moto request
machinery (fast restarts), and SQS receipts or visibility (which a request replay could not reproduce)
are simply reset: after a restart every stored message is visible again, as after a visibility timeout.
A snapshot is a pickle of moto's own objects, tied to the moto version that wrote it: a different version
refuses to load it and asks for `--fresh`.
"""

from __future__ import annotations

import _thread
import copyreg
import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dormant.dev import s3journal
from dormant.dev.objectfiles import ObjectFiles

log = logging.getLogger("dormant.dev.persistence")

_FRAME = struct.Struct("<II")  # payload length, CRC-32 of the payload
COMPACT_BYTES = 64 * 1024 * 1024
OBJECT_BYTES_PER_JOURNAL_BYTE = 8  # object files written (some garbage by now) per journal byte before compacting

# moto's objects hold locks and conditions: a snapshot stores fresh ones in their place.
copyreg.pickle(_thread.LockType, lambda _lock: (threading.Lock, ()))
copyreg.pickle(_thread.RLock, lambda _lock: (threading.RLock, ()))
copyreg.pickle(threading.Condition, lambda _condition: (threading.Condition, ()))


class PersistenceError(RuntimeError):
    """The data directory cannot be loaded (another moto version wrote it, or it is not ours)."""


@dataclass
class Restored:
    """What `restore()` found."""

    generation: int = 0
    records: int = 0
    torn: bool = False
    tables: int = 0
    items: int = 0
    messages: int = 0
    buckets: int = 0
    objects: int = 0
    objects_dropped: list[str] = field(default_factory=list)


def _moto_version() -> str:
    import moto

    return str(moto.__version__)


def _backends() -> tuple[Any, Any]:
    from moto.dynamodb.models import dynamodb_backends
    from moto.sqs.models import sqs_backends

    return dynamodb_backends, sqs_backends


def _existing(backend_dict: Any) -> Iterator[tuple[str, str, Any]]:
    """(account, region, backend) of the backends moto has created (iterating never creates one)."""
    for account, regions in dict.items(backend_dict):
        for region, backend in dict.items(regions):
            yield account, region, backend


class Touched:
    """The DynamoDB keys written by the request in progress (recorded by hooks on moto's backend)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def start(self) -> None:
        self._local.keys = []

    def add(self, key: tuple[str, str, str, dict[str, Any], dict[str, Any] | None]) -> None:
        keys = getattr(self._local, "keys", None)
        if keys is not None:
            keys.append(key)

    def take(self) -> list[tuple[str, str, str, dict[str, Any], dict[str, Any] | None]]:
        keys: list[Any] = getattr(self._local, "keys", None) or []
        self._local.keys = None
        return _unique(keys)


def _frozen(value: dict[str, Any] | None) -> str:
    return repr(sorted(value.items())) if value else ""


def _unique(keys: list[Any]) -> list[Any]:
    seen: set[tuple[str, str, str, str, str]] = set()
    out = []
    for account, region, table, hash_key, range_key in keys:
        marker = (account, region, table, _frozen(hash_key), _frozen(range_key))
        if marker not in seen:
            seen.add(marker)
            out.append((account, region, table, hash_key, range_key))
    return out


def install_hooks(touched: Touched) -> None:
    """Wrap moto's DynamoDB backend writes so each records the key it wrote (every item write goes through
    put_item, delete_item or update_item of the backend: single writes, batches and transactions)."""
    from moto.dynamodb.models import DynamoDBBackend

    if getattr(DynamoDBBackend, "_dormant_hooked", False):
        return

    def key_of(backend: Any, table_name: str, attrs: dict[str, Any]) -> tuple[Any, ...] | None:
        table = backend.tables.get(table_name)
        if table is None or table.hash_key_attr not in attrs:
            return None
        range_key = attrs.get(table.range_key_attr) if table.range_key_attr else None
        return (backend.account_id, backend.region_name, table_name, attrs[table.hash_key_attr], range_key)

    def wrap(method_name: str, attrs_argument: int) -> None:
        original = getattr(DynamoDBBackend, method_name)

        def hooked(self: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
            try:
                return original(self, table_name, *args, **kwargs)
            finally:
                attrs = args[attrs_argument] if len(args) > attrs_argument else kwargs.get(
                    "item_attrs" if method_name == "put_item" else "key")
                if isinstance(attrs, dict):
                    key = key_of(self, table_name, attrs)
                    if key is not None:
                        touched.add(key)

        setattr(DynamoDBBackend, method_name, hooked)

    for name in ("put_item", "delete_item", "update_item"):
        wrap(name, 0)
    DynamoDBBackend._dormant_hooked = True  # type: ignore[attr-defined]


class Persistence:
    """The data directory of one moto server. Call `after_dynamodb` / `after_sqs` under the service's
    request lock after every request; `compact()` needs every request lock held."""

    def __init__(self, directory: Path, *, compact_bytes: int = COMPACT_BYTES) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _lock_directory(self.directory)
        self.compact_bytes = compact_bytes
        self.touched = Touched()
        self.generation = 0
        self._journal_fd: int | None = None
        self._journal_size = 0
        self._known: dict[tuple[str, str, str], set[str]] = {}
        self._write_lock = threading.Lock()  # DynamoDB, SQS and S3 requests append concurrently
        self.objects = ObjectFiles(self.directory)
        self.s3_touched = s3journal.S3Touched()
        self._compaction_due = False
        install_hooks(self.touched)
        s3journal.install_hooks(self.s3_touched)

    # -- start ---------------------------------------------------------------------------------------
    def restore(self) -> Restored:
        """Load the newest snapshot and replay its journal into moto; open the journal for appending."""
        snapshots = sorted(self._generations("snapshot-", ".pickle"))
        result = Restored()
        if snapshots:
            self.generation = snapshots[-1]
            self._load_snapshot(self.directory / f"snapshot-{self.generation}.pickle", result)
        result.generation = self.generation
        journal = self._journal_path(self.generation)
        if journal.exists():
            result.records, result.torn, valid = self._replay(journal)
            if result.torn:  # drop the torn tail so appends follow the last whole record
                with open(journal, "r+b") as handle:
                    handle.truncate(valid)
        self._reset_deliveries(result)
        dynamodb, _ = _backends()
        tables = [t for _, _, backend in _existing(dynamodb) for t in backend.tables.values()]
        result.tables, result.items = len(tables), sum(len(t.all_items()) for t in tables)
        used, result.objects_dropped = s3journal.check_files(self.objects.exists)
        for dropped in result.objects_dropped:
            log.warning("dropped %s: its object file is missing or short (a power cut?)", dropped)
        self.objects.collect_garbage(used)
        result.buckets, result.objects = s3journal.counts()
        self._remember_messages()
        for stale in self.directory.glob("*"):
            current = stale.name in (f"snapshot-{self.generation}.pickle", journal.name)
            if not current and stale.name.startswith(("snapshot-", "journal-")):
                stale.unlink(missing_ok=True)
        self._open_journal()
        return result

    def _generations(self, prefix: str, suffix: str) -> Iterator[int]:
        for path in self.directory.glob(f"{prefix}*{suffix}"):
            number = path.name[len(prefix):-len(suffix)]
            if number.isdigit():
                yield int(number)

    def _journal_path(self, generation: int) -> Path:
        return self.directory / f"journal-{generation}.log"

    def _load_snapshot(self, path: Path, result: Restored) -> None:
        try:
            with open(path, "rb") as handle:
                state = self.objects.load(handle)  # our own file, written by this module
        except Exception as error:
            raise PersistenceError(f"cannot read {path}: {type(error).__name__}: {error}; start with --fresh "
                                   "to begin with empty data (the directory is kept until then)") from error
        if not isinstance(state, dict) or state.get("moto") != _moto_version():
            found = state.get("moto") if isinstance(state, dict) else "unknown"
            raise PersistenceError(f"{path} was written by moto {found}, this is moto {_moto_version()}: "
                                   "start with --fresh to begin with empty data")
        dynamodb, sqs = _backends()
        for (account, region), tables in state["dynamodb"].items():
            dynamodb[account][region].tables = tables
        for (account, region), queues in state["sqs"].items():
            sqs[account][region].queues = queues
        s3journal.load_state(state.get("s3", {}))  # (a snapshot from before S3 was kept has none)

    def _replay(self, journal: Path) -> tuple[int, bool, int]:
        data = journal.read_bytes()
        offset = records = 0
        while offset + _FRAME.size <= len(data):
            length, crc = _FRAME.unpack_from(data, offset)
            payload = data[offset + _FRAME.size: offset + _FRAME.size + length]
            if len(payload) != length or zlib.crc32(payload) != crc:
                return records, True, offset
            self._apply(self.objects.loads(payload))  # our own journal
            records += 1
            offset += _FRAME.size + length
        return records, offset != len(data), offset

    def _apply(self, record: tuple[Any, ...]) -> None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        dynamodb, sqs = _backends()
        kind = record[0]
        if kind == "ddb":
            _, account, region, name, hash_raw, range_raw, item = record
            table = dynamodb[account][region].tables.get(name)
            if table is None:
                return
            hash_key = DynamoType(hash_raw)
            if range_raw is None:
                if item is None:
                    table.items.pop(hash_key, None)
                else:
                    table.items[hash_key] = item
            elif item is None:
                table.items.get(hash_key, {}).pop(DynamoType(range_raw), None)
                if hash_key in table.items and not table.items[hash_key]:
                    del table.items[hash_key]
            else:
                table.items[hash_key][DynamoType(range_raw)] = item
        elif kind == "sqs+":
            _, account, region, name, message = record
            queue = sqs[account][region].queues.get(name)
            if queue is not None and all(m.id != message.id for m in queue._messages):
                queue._messages.append(message)
        elif kind == "sqs-":
            _, account, region, name, ids = record
            queue = sqs[account][region].queues.get(name)
            if queue is not None:
                gone = set(ids)
                queue._messages = [m for m in queue._messages if m.id not in gone]
        elif kind.startswith("s3"):
            s3journal.apply(record)

    def _reset_deliveries(self, result: Restored) -> None:
        """No consumer outlived the old server: every message is visible again (delays still hold)."""
        _, sqs = _backends()
        for _, _, backend in _existing(sqs):
            for queue in backend.queues.values():
                queue._pending_messages = set()
                for message in queue._messages:
                    message.visible_at = 0.0
                result.messages += len(queue._messages)

    # -- while serving -------------------------------------------------------------------------------
    def before_request(self) -> None:
        self.touched.start()
        self.s3_touched.start()

    def after_dynamodb(self) -> None:
        """Journal the post-image of every item the request wrote."""
        from moto.dynamodb.models.dynamo_type import DynamoType

        dynamodb, _ = _backends()
        for account, region, name, hash_raw, range_raw in self.touched.take():
            table = dynamodb[account][region].tables.get(name)
            if table is None:
                continue
            try:
                item = table.get_item(DynamoType(hash_raw), DynamoType(range_raw) if range_raw else None)
            except Exception:  # a malformed key the request itself was refused for
                continue
            self._append(("ddb", account, region, name, hash_raw, range_raw, item))

    def after_sqs(self) -> None:
        """Journal the messages added and removed since the last request (sends, deletes, DLQ moves)."""
        _, sqs = _backends()
        for account, region, backend in _existing(sqs):
            for name, queue in backend.queues.items():
                key = (account, region, name)
                current = {m.id: m for m in queue._messages}
                known = self._known.get(key, set())
                added = [m for mid, m in current.items() if mid not in known]
                removed = [mid for mid in known if mid not in current]
                for message in added:
                    self._append(("sqs+", account, region, name, message))
                if removed:
                    self._append(("sqs-", account, region, name, removed))
                self._known[key] = set(current)

    def after_s3(self, ok: bool) -> None:
        """Journal every object name and upload the request wrote, as it is now (a failed request may have written
        some: a batch delete stopped half-way). A successful write that touched none changed something the journal
        cannot describe (a bucket's settings): compact before its response."""
        touched = self.s3_touched.take()
        for record in s3journal.post_images(touched):
            self._append(record)  # pickling a new key writes its object file first (dormant.dev.objectfiles)
        if ok and not touched:
            self._compaction_due = True

    @property
    def wants_compaction(self) -> bool:
        return (self._compaction_due or self._journal_size >= self.compact_bytes
                or self.objects.written_bytes >= self.compact_bytes * OBJECT_BYTES_PER_JOURNAL_BYTE)

    def _append(self, record: tuple[Any, ...]) -> None:
        payload = self.objects.dumps(record)
        frame = _FRAME.pack(len(payload), zlib.crc32(payload)) + payload
        with self._write_lock:
            assert self._journal_fd is not None
            os.write(self._journal_fd, frame)  # one write: whole in the page cache before the response goes out
            self._journal_size += len(frame)

    def _open_journal(self) -> None:
        path = self._journal_path(self.generation)
        self._journal_fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._journal_size = path.stat().st_size

    def _remember_messages(self) -> None:
        _, sqs = _backends()
        self._known = {(a, r, name): {m.id for m in queue._messages}
                       for a, r, backend in _existing(sqs) for name, queue in backend.queues.items()}

    # -- compaction ----------------------------------------------------------------------------------
    def compact(self) -> None:
        """Write generation G+1's snapshot, start its empty journal, drop generation G (all locks held)."""
        dynamodb, sqs = _backends()
        state = {"moto": _moto_version(),
                 "dynamodb": {(a, r): b.tables for a, r, b in _existing(dynamodb)},
                 "sqs": {(a, r): b.queues for a, r, b in _existing(sqs)},
                 "s3": s3journal.snapshot_state()}
        generation = self.generation + 1
        target = self.directory / f"snapshot-{generation}.pickle"
        temporary = target.with_suffix(".tmp")
        used: set[str] = set()
        with open(temporary, "wb") as handle:
            self.objects.dump(state, handle, collect=used)
            handle.flush()
            os.fsync(handle.fileno())
        self.objects.sync()  # the files the snapshot names are on disk before it is
        os.replace(temporary, target)  # the new generation exists from here on; its journal is empty
        _fsync_directory(self.directory)
        old_journal = self._journal_path(self.generation)
        old_snapshot = self.directory / f"snapshot-{self.generation}.pickle"
        with self._write_lock:
            if self._journal_fd is not None:
                os.close(self._journal_fd)
            self.generation = generation
            self._open_journal()
        self._remember_messages()
        self._compaction_due = False
        old_journal.unlink(missing_ok=True)
        old_snapshot.unlink(missing_ok=True)
        self.objects.collect_garbage(used)  # objects deleted or replaced since: no live key reads these
        log.info("compacted the data directory into generation %d", generation)

    def close(self) -> None:
        with self._write_lock:
            if self._journal_fd is not None:
                os.close(self._journal_fd)
                self._journal_fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None


def _lock_directory(directory: Path) -> int | None:
    """An exclusive lock on the directory for this process's life: two servers appending to one journal
    would interleave their records."""
    try:
        import fcntl
    except ImportError:  # not on Unix: no lock
        return None
    fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise PersistenceError(f"{directory} is in use by another dormant dev (or moto server); stop it, or "
                               "choose another --data-dir") from None
    return fd


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
