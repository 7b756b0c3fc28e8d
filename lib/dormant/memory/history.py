"""The memory store's history of an actor, kept compactly: each entry as a row (dormant.workflow.history.Row).

A stored entry is the JSON object a commit wrote (dormant.workflow.entries.Entry.to_json). As a dict a completed step
takes 464 bytes (its eleven keys take CPython's next dict size); as a row, its key tuple shared with every entry of
the same keys, 136. Read back it is the same dict, keys in the same order; a load hands the rows themselves to the
engine, which reads them without making the dicts (Entry.from_row).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any

from dormant.workflow.history import Row, entry_of, row_of


class CompactHistory(MutableMapping[str, dict[str, Any]]):
    """location -> entry, each kept as a row; reading an entry builds its dict (a copy: changing it changes nothing
    stored; store the changed entry again)."""

    __slots__ = ("_rows",)

    def __init__(self, entries: Iterable[dict[str, Any]] = ()) -> None:
        self._rows: dict[str, Row] = {entry["location"]: row_of(entry) for entry in entries}

    def __getitem__(self, location: str) -> dict[str, Any]:
        return entry_of(self._rows[location])

    def __setitem__(self, location: str, entry: dict[str, Any]) -> None:
        self._rows[location] = row_of(entry)

    def __delitem__(self, location: str) -> None:
        del self._rows[location]

    def __contains__(self, location: object) -> bool:
        return location in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __eq__(self, other: object) -> bool:  # (tests compare whole stores before and after an operation)
        if isinstance(other, CompactHistory):
            return self._rows == other._rows
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CompactHistory({len(self._rows)} entries)"

    def upsert(self, entries: Iterable[dict[str, Any]]) -> None:
        """Store each of `entries` under its location (a commit's upserts: `self[location] = entry` each, in one
        call)."""
        rows = self._rows
        for entry in entries:
            rows[entry["location"]] = row_of(entry)

    def delete_prefix(self, prefix: str) -> None:
        """Drop the entry at `prefix` and those under it (a commit's deleted prefix)."""
        below, rows = prefix + "/", self._rows
        for location in [loc for loc in rows if loc.startswith(below) or loc == prefix]:
            del rows[location]

    def rows(self) -> list[Row]:
        return list(self._rows.values())

