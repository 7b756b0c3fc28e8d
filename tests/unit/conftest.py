"""The unit tests run every workflow primitive: each entry the engine commits there is checked to have had its fields
of some kinds set through `Entry.put` (dormant.workflow.entries), which `to_json` and the size bound rely on to find
them; a field written past it would be left out of the stored entry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dormant.workflow.entries import Entry


@pytest.fixture(autouse=True)
def entries_keep_their_fields_of_some_kinds_in_extra(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    to_json = Entry.to_json

    def checked(self: Entry) -> dict[str, Any]:
        # (asking for `__dict__` makes it: only the tests pay that)
        assert self.extra is self.__dict__ or (self.extra is None and not self.__dict__), (
            f"{self!r} has fields of some kinds that Entry.put did not set: {sorted(self.__dict__)}")
        return to_json(self)

    monkeypatch.setattr(Entry, "to_json", checked)
    yield
