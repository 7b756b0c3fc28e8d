"""The bytes of the embedded moto server's S3 objects, in files of their own: `<data dir>/objects/<2 hex>/<30 hex>`.

moto keeps an object's value in its `FakeKey` (a spooled temporary file: memory up to 5 MB, /tmp beyond). Pickled
with the key, every 20 MB object would be 20 MB more in every snapshot and every journal record of that key, and
each compaction would rewrite all of them. So the pickler of the data directory (`ObjectFiles.dumps`, `dump`)
reduces a FakeKey to its other attributes plus the name and size of a file holding its value:

- the file is written once per key, the first time the key is pickled (when the request that created it is
  journaled, before the response): a temporary file renamed into place, so it is whole or absent;
- the key then reads its value from that file (`StoredValue`) and its spooled buffer is closed: moto's memory no
  longer grows with the objects, and a restored key is the same as a live one (restoring reads no object bytes);
- a snapshot pickles names only: its cost does not depend on the objects' sizes. Before a snapshot is renamed
  into place, the files it names are fsynced (a snapshot never names a file a power cut could lose);
- a file no live key names is garbage (an object deleted or overwritten): compaction and restore delete those.

moto never writes a key's value after creating the key (a put makes a new key), which is what makes one file per
key enough. Keys moto has disposed of (deleted, replaced) are pickled without a file: their value is gone.
"""

from __future__ import annotations

import copyreg
import functools
import io
import logging
import os
import pickle
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

log = logging.getLogger("dormant.dev.persistence")

ATTRIBUTE = "_dormant_object"  # on a FakeKey: (file name, size) of its value
_CHUNK = 1024 * 1024
_SKIPPED = ("_value_buffer", "lock")  # what moto's own __getstate__ leaves out too (a file, a lock)


class StoredValue:
    """A key's value read from its file: the read-only part of a file object moto uses (seek, tell, read, close).
    Each read opens the file, so a million keys hold no file descriptors."""

    def __init__(self, path: Path | None, size: int) -> None:
        self.path = path
        self.size = size
        self.position = 0
        self.closed = path is None  # a disposed key's value: reading it fails as moto's closed buffer does

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check()
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def tell(self) -> int:
        self._check()
        return self.position

    def read(self, count: int = -1) -> bytes:
        self._check()
        assert self.path is not None
        if self.position >= self.size:
            return b""
        with open(self.path, "rb") as handle:
            handle.seek(self.position)
            data = handle.read(self.size - self.position if count is None or count < 0 else count)
        self.position += len(data)
        return data

    def write(self, data: bytes) -> int:
        raise io.UnsupportedOperation("a stored S3 value is never written after its key was created")

    def truncate(self, size: int | None = None) -> int:
        raise io.UnsupportedOperation("a stored S3 value is never written after its key was created")

    def close(self) -> None:
        self.closed = True

    def _check(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")


def restore_key(state: dict[str, Any], name: str | None, size: int) -> Any:
    """Stands in the pickles for `ObjectFiles.restore_key`, which only an `ObjectFiles` unpickler can call."""
    raise pickle.UnpicklingError("an S3 key of the data directory is read with ObjectFiles.loads/load")


class ObjectFiles:
    """The `objects/` folder of a data directory, and the pickler and unpickler that use it."""

    def __init__(self, data_dir: Path) -> None:
        from moto.s3.models import FakeKey

        self.directory = Path(data_dir) / "objects"
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fake_key: Any = FakeKey
        # Keys are only pickled under the S3 lock (a request's journal records) or with every lock held (a
        # snapshot), so what follows needs no lock of its own.
        self._unsynced: set[Path] = set()
        self.written_bytes = 0  # object bytes written since the last compaction (they may be garbage by now)
        for stale in self.directory.glob("*/*.tmp"):  # a write cut short by a crash
            stale.unlink(missing_ok=True)

    # -- pickling -------------------------------------------------------------------------------------------
    def dumps(self, value: Any) -> bytes:
        buffer = io.BytesIO()
        self.dump(value, buffer)
        return buffer.getvalue()

    def dump(self, value: Any, handle: IO[bytes], *, collect: set[str] | None = None) -> None:
        """Pickle `value`; with `collect`, add the name of every object file it refers to."""
        pickler = pickle.Pickler(handle, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.dispatch_table = {**copyreg.dispatch_table,
                                  self._fake_key: functools.partial(self._reduce_key, collect=collect)}
        pickler.dump(value)

    def loads(self, data: bytes) -> Any:
        return self.load(io.BytesIO(data))

    def load(self, handle: IO[bytes]) -> Any:
        return _Unpickler(handle, self).load()

    def _reduce_key(self, key: Any, collect: set[str] | None) -> tuple[Any, tuple[Any, ...]]:
        name, size = (None, 0) if key.disposed else self.store(key)  # (before the state: it notes the file)
        state = {attribute: value for attribute, value in key.__dict__.items() if attribute not in _SKIPPED}
        if name is not None and collect is not None:
            collect.add(name)
        return restore_key, (state, name, size)

    def restore_key(self, state: dict[str, Any], name: str | None, size: int) -> Any:
        key = self._fake_key.__new__(self._fake_key)  # as moto's __setstate__, without reading a value
        key.__dict__.update(state)
        key._value_buffer = StoredValue(None if name is None else self.path(name), size)
        key.lock = threading.Lock()
        return key

    # -- files ----------------------------------------------------------------------------------------------
    def path(self, name: str) -> Path:
        return self.directory / name[:2] / name[2:]

    def store(self, key: Any) -> tuple[str, int]:
        """The file of a live key's value, written on first use; the key reads from it from then on."""
        known = getattr(key, ATTRIBUTE, None)
        if known is not None:
            return known  # type: ignore[no-any-return]
        name = uuid.uuid4().hex
        target = self.path(name)
        target.parent.mkdir(exist_ok=True)
        temporary = target.with_name(target.name + ".tmp")
        with key.lock:
            source = key._value_buffer
            source.seek(0)
            size = 0
            with open(temporary, "wb") as out:
                while chunk := source.read(_CHUNK):
                    out.write(chunk)
                    size += len(chunk)
            os.replace(temporary, target)
            key._value_buffer = StoredValue(target, size)
            source.close()  # the spooled copy (memory or /tmp) is not needed any more
        setattr(key, ATTRIBUTE, (name, size))
        self._unsynced.add(target)
        self.written_bytes += size
        return name, size

    def exists(self, name: str, size: int) -> bool:
        try:
            return self.path(name).stat().st_size == size
        except OSError:
            return False

    def sync(self) -> None:
        """fsync the files written since the last call, and their folders (before a snapshot names them)."""
        folders = set()
        for path in self._unsynced:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue  # collected meanwhile: no snapshot names it
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            folders.add(path.parent)
        for folder in folders:
            _fsync_directory(folder)
        self._unsynced.clear()

    def collect_garbage(self, keep: Iterable[str]) -> tuple[int, int]:
        """Delete every object file not in `keep`; (files, bytes) deleted."""
        kept = set(keep)
        files = freed = 0
        for folder in self.directory.iterdir():
            if not folder.is_dir():
                continue
            for path in folder.iterdir():
                if folder.name + path.name in kept or path.name.endswith(".tmp"):
                    continue
                try:
                    freed += path.stat().st_size
                    path.unlink()
                    files += 1
                except FileNotFoundError:
                    pass
            if not any(folder.iterdir()):
                folder.rmdir()
        self.written_bytes = 0
        if files:
            log.info("deleted %d S3 object file(s) nothing refers to any more (%d bytes)", files, freed)
        return files, freed


class _Unpickler(pickle.Unpickler):
    def __init__(self, handle: IO[bytes], objects: ObjectFiles) -> None:
        super().__init__(handle)
        self._objects = objects

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == (__name__, "restore_key"):
            return self._objects.restore_key
        return super().find_class(module, name)


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
