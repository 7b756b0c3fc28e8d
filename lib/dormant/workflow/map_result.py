"""What `ctx.map` returns and raises: every item's outcome in item order, and the completion rule that decides.

No I/O; the run itself is in maps.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dormant.workflow.errors import RecordedError
from dormant.workflow.history import EntryStatus


class MapItemStatus(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"  # it was in flight when the map was decided
    NOT_STARTED = "not_started"  # the map was decided before its turn came


@dataclass(frozen=True)
class MapItem:
    """One item's outcome: `value` when it succeeded, `error` (the recorded form) when it failed. Its fields are
    JSON, so a result can be returned from the workflow or a step as it is."""

    index: int
    item: Any  # the item as recorded (its JSON form)
    status: MapItemStatus
    value: Any = None
    error_type: str | None = None  # the failed item's exception, by name
    error_message: str | None = None

    @property
    def error(self) -> RecordedError | None:
        """The failed item's error, as JoinError's: its type by name and its message."""
        return None if self.error_type is None else RecordedError(self.error_type, self.error_message or "")


@dataclass(frozen=True)
class MapResult:
    """Every item's outcome, in item order (`result[i]` is item i's)."""

    name: str
    items: tuple[MapItem, ...]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[MapItem]:
        return iter(self.items)

    def __getitem__(self, index: int) -> MapItem:
        return self.items[index]

    def _having(self, status: MapItemStatus) -> list[MapItem]:
        return [item for item in self.items if item.status is status]

    @property
    def values(self) -> list[Any]:
        """The results of the items that succeeded, in item order."""
        return [item.value for item in self.items if item.status is MapItemStatus.SUCCEEDED]

    @property
    def succeeded(self) -> list[MapItem]:
        return self._having(MapItemStatus.SUCCEEDED)

    @property
    def failed(self) -> list[MapItem]:
        return self._having(MapItemStatus.FAILED)

    @property
    def cancelled(self) -> list[MapItem]:
        return self._having(MapItemStatus.CANCELLED)

    @property
    def not_started(self) -> list[MapItem]:
        return self._having(MapItemStatus.NOT_STARTED)

    @property
    def errors(self) -> dict[int, Exception]:
        """Item index -> its error, for the items that failed."""
        return {item.index: error for item in self.items if (error := item.error) is not None}


@dataclass(frozen=True)
class CompletionRule:
    """When a map is decided, from its counts: succeeded, failed, and unfinished (running, waiting, not started).

    - more than `tolerated_failures` failed: failed;
    - with `min_successes`: that many succeeded: completed; too few left to get there: failed;
    - without it: completed once every item has finished.
    Neither given: every item must succeed (tolerated_failures 0). Only `min_successes` given: any number may fail
    as long as the successes can still be reached.
    """

    total: int
    min_successes: int | None
    tolerated_failures: int | None
    every_item: bool = False  # neither was given

    @staticmethod
    def of(total: int, min_successes: int | None, tolerated_failures: int | None) -> CompletionRule:
        if min_successes is None and tolerated_failures is None:
            return CompletionRule(total, None, 0, every_item=True)
        return CompletionRule(total, min_successes, tolerated_failures)

    def decide(self, succeeded: int, failed: int) -> tuple[EntryStatus, str] | None:
        """(COMPLETED or FAILED, why) once decided, else None."""
        unfinished = self.total - succeeded - failed
        if self.tolerated_failures is not None and failed > self.tolerated_failures:
            if self.every_item:
                return EntryStatus.FAILED, (f"{failed} of {self.total} items failed, and every item must succeed "
                                            "(neither min_successes nor tolerated_failures was given)")
            return EntryStatus.FAILED, (f"{failed} of {self.total} items failed, more than the "
                                        f"{self.tolerated_failures} tolerated (tolerated_failures)")
        if self.min_successes is not None:
            if succeeded >= self.min_successes:
                return EntryStatus.COMPLETED, f"{succeeded} items succeeded (min_successes {self.min_successes})"
            if succeeded + unfinished < self.min_successes:
                return EntryStatus.FAILED, (f"{succeeded} of {self.total} items succeeded and {unfinished} are "
                                            f"left: min_successes {self.min_successes} can no longer be reached")
            return None
        if unfinished == 0:
            return EntryStatus.COMPLETED, f"all {self.total} items finished"
        return None
