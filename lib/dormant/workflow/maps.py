"""`ctx.map`: one async function over a list of items, at most `max_concurrency` items in flight, ending as soon as
its completion rule is decided (map_result.CompletionRule).

History. The map's entry (kind map) records the items, as JSON, when the map starts, and how it ended (its status,
and the reason in `error` when it failed). Each item that starts gets an entry of its own, kind map_item, named by
its index (`<map>/<index>`): pending while the item is in flight, then its outcome (output, error, or cancelled).
The item's own entries live under it, a scope like a join branch. A commit therefore carries the entries of the
items that changed, never the whole map, and a replay reads each item's entry once (a finished item runs again,
sealed, only when it may hold rollback handlers). Items start in item order, so their entries are recorded in that
order and the k-th one is item k; items without one never started.

In flight means started and not finished: an item waiting for a timer, a message or a retry keeps its slot across
wake-ups (it has begun its work, and a bound on concurrent work must count it), so no more than `max_concurrency`
items are ever between their start and their end. A slot freed starts the next item at once, in the task of the
item that freed it; the item that decides the map cancels the others there too, as a race's winner does.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from pydantic_core import PydanticSerializationError

from dormant.workflow.entries import Entry
from dormant.workflow.errors import (
    HistoryDivergedError,
    InvalidJsonError,
    MapError,
    WorkflowDefinitionError,
)
from dormant.workflow.execution import error_info, to_json
from dormant.workflow.frame import CancelToken, Frame
from dormant.workflow.history import EntryKind, EntryStatus, ErrorInfo, validate_name
from dormant.workflow.map_result import CompletionRule, MapItem, MapItemStatus, MapResult
from dormant.workflow.replay import user_code_site
from dormant.workflow.signals import BranchCancelled, RollbackStop, Suspend, raise_control

ItemFn = Callable[[Any, Any], Awaitable[Any]]  # async def (ctx, item) -> value: the context is the frame's
_PREVIEW = 60  # characters of an item's JSON shown in a divergence


def _count(name: str, what: str, value: int | None, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f'map "{name}": {what} must be an int or None, got {type(value).__name__}')
    if value < minimum:
        raise ValueError(f'map "{name}": {what} must be >= {minimum}, got {value}')
    return value


def _items_json(name: str, items: Iterable[Any]) -> list[Any]:
    if isinstance(items, str | bytes | bytearray | Mapping) or not isinstance(items, Iterable):
        raise TypeError(f'map "{name}": items must be a list (or another iterable) of values, got '
                        f"{type(items).__name__}")
    values = []
    for index, item in enumerate(items):
        what = f'item {index} of map "{name}"'
        try:
            values.append(to_json(item, what))
        except PydanticSerializationError:
            raise InvalidJsonError(f"{what} cannot be stored: it holds a value with no JSON form",
                                   rule="no JSON form") from None
    return values


def _canonical(value: Any) -> str:
    # Exact: true is not 1 and 1 is not 1.0 here, as they are not in JSON (Python's == says they are).
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _preview(value: Any) -> str:
    text = _canonical(value)
    return text if len(text) <= _PREVIEW else text[:_PREVIEW - 1] + "…"


def _check_items(entry: Entry, items: list[Any]) -> None:
    """The code's items must be the recorded ones: a divergence (with the first difference) otherwise."""
    recorded = entry.items or []
    if _canonical(recorded) == _canonical(items):
        return
    differing = next((i for i, (old, new) in enumerate(zip(recorded, items, strict=False))
                      if _canonical(old) != _canonical(new)), None)
    what = f'map "{entry.name}"'
    if differing is None:
        had, asks = f"{what} of {len(recorded)} items", f"{what} of {len(items)} items"
    else:
        had = f"{what}, item {differing}: {_preview(recorded[differing])}"
        asks = f"{what}, item {differing}: {_preview(items[differing])}"
    raise HistoryDivergedError(
        location=entry.location, recorded=had, requested=asks, code_site=user_code_site(),
        hint="The items of a recorded map cannot change under a running actor: its items received the recorded "
             "values and their outcomes are recorded by index. Pass the same items (compute them in a step, whose "
             f'result is recorded), or retire the map with ctx.removed("{entry.name}", "map") and give the new one '
             "another name.")


async def run_map(frame: Frame, name: str, items: Iterable[Any], fn: ItemFn, *,
                  max_concurrency: int | None, min_successes: int | None,
                  tolerated_failures: int | None) -> MapResult:
    validate_name(name, "map")
    if not callable(fn):
        raise TypeError(f'map "{name}": fn must be an async function (ctx, item) -> result, got '
                        f"{type(fn).__name__}")
    values = _items_json(name, items)
    limit = _count(name, "max_concurrency", max_concurrency, 1)
    minimum = _count(name, "min_successes", min_successes, 0)
    if minimum is not None and minimum > len(values):
        raise ValueError(f'map "{name}": min_successes must be between 0 and the number of items ({len(values)}), '
                         f"got {minimum}")
    tolerated = _count(name, "tolerated_failures", tolerated_failures, 0)
    ex, scope = frame.execution, frame.scope
    frame.check_cancelled()
    entry = scope.claim(EntryKind.MAP, name)
    if entry is None:
        if ex.rolling_back:
            raise RollbackStop()
        entry = ex.new_entry(EntryKind.MAP, scope.child(name), name, items=values)
        ex.touch(entry)
    else:
        ex.replayed += 1
        _check_items(entry, values)
    rule = CompletionRule.of(len(values), minimum, tolerated)
    return await _MapRun(frame, entry, fn, rule, limit if limit is not None else max(len(values), 1)).run()


class _MapRun:
    """One run (one wake-up) of one map: its items' bookkeeping, the slots, the decision."""

    def __init__(self, frame: Frame, entry: Entry, fn: ItemFn, rule: CompletionRule, limit: int) -> None:
        self.frame, self.ex, self.entry, self.fn, self.rule, self.limit = frame, frame.execution, entry, fn, rule, limit
        self.items: list[Any] = entry.items or []
        self.token = CancelToken(frame.cancel, reason=f'its map "{entry.name}" was decided')
        self.records = self._recorded_items()
        self.succeeded = sum(r.status is EntryStatus.COMPLETED for r in self.records)
        self.failed = sum(r.status is EntryStatus.FAILED for r in self.records)
        # Started and not finished: each holds a slot. Those started by an earlier run are resumed first, up to the
        # bound; more are pending only when an operator's resume restarted failed items or a deploy lowered the
        # bound, and those wait for a slot (before any new item starts).
        pending = [i for i, r in enumerate(self.records) if r.status is EntryStatus.PENDING]
        self.in_flight = set(pending[:limit])
        self.queued = deque(pending[limit:])
        self.to_run: dict[int, None] = dict.fromkeys(pending[:limit])  # in flight, not run yet here (ordered set)
        # A serial re-run (after a WakeRestart) runs first the items the attempt before it finished, in the order
        # they finished: the same decision at the same point, and no wait for a slow item the map no longer needs.
        self.hint = [int(i) for i in self.ex.race_winners.get(entry.location, "").split(",") if i.isdigit()]
        self.hint_at = 0
        self.finish_order: list[int] = []
        self.suspensions: dict[int, Suspend] = {}
        self.control: dict[int, BaseException] = {}
        self.tasks: dict[int, asyncio.Future[None]] = {}
        self.decision: tuple[EntryStatus, str] | None = None
        self.closing = False  # this map's own task was cancelled: start nothing more

    def _recorded_items(self) -> list[Entry]:
        records = [e for e in self.ex.index.children(self.entry.location) if e.kind is EntryKind.MAP_ITEM]
        for index, record in enumerate(records):
            if record.name != str(index) or index >= len(self.items):
                raise HistoryDivergedError(
                    location=record.location, recorded=f"map item {record.name!r}", requested=f"map item {index}",
                    code_site=user_code_site(), hint="The history of this map is not one Dormant records: items "
                    "start in item order, one entry each. Restore the history, or retire the map with ctx.removed.")
        return records

    # -- the run ------------------------------------------------------------------------------------------------
    async def run(self) -> MapResult:
        try:
            return await self._run()
        finally:
            if self.ex.restart_pending and self.finish_order:  # this attempt is void: leave the hint for the next
                self.ex.race_winners[self.entry.location] = ",".join(map(str, self.finish_order))

    async def _run(self) -> MapResult:
        ex = self.ex
        for index, record in enumerate(self.records):
            if record.status is EntryStatus.COMPLETED and self._may_compensate(record):
                await self._replay_sealed(index)
        if self.entry.status in (EntryStatus.COMPLETED, EntryStatus.FAILED):
            return self._result()  # decided in history
        if ex.rolling_back:
            await self._collect_rollbacks()
        self._decide()
        if self.decision is None:
            await (self._run_serially() if ex.serial else self._run_concurrently())
        raise_control({str(index): stop for index, stop in self.control.items()})
        if self.decision is None:
            # A branch beside this map diverged (nothing new may start), or the race it runs in was won elsewhere.
            self.frame.check_cancelled()
            if self.suspensions:
                raise Suspend.merge(self.suspensions.values())
            raise RuntimeError(f'map "{self.entry.name}" stopped undecided with nothing in flight')  # a bug if seen
        status, reason = self.decision
        for index in sorted(self.in_flight | set(self.queued)):  # waiting when the map was decided: cancelled
            self._record(index, EntryStatus.CANCELLED)
        self.queued.clear()
        self.entry.status = status
        self.entry.error = ErrorInfo(type="MapError", message=reason) if status is EntryStatus.FAILED else None
        ex.touch(self.entry)
        return self._result()

    def _may_compensate(self, record: Entry) -> bool:
        """Whether a succeeded item may hold rollback handlers: only then is it run again in replay (to register
        them). Others are not, as finished loop iterations are not: a replay costs a lookup per item, not a run."""
        if self.frame.scope.checkpointed:
            return True
        below = [record.location]
        while below:
            for entry in self.ex.index.children(below.pop()):
                if entry.kind is EntryKind.ROLLBACK_CHECKPOINT:
                    return True
                below.append(entry.location)
        return False

    async def _replay_sealed(self, index: int) -> None:
        """A succeeded item runs again in replay only (registering its rollback handlers, checking its scope)."""
        try:
            await self._run_item(index, sealed=True)
        except HistoryDivergedError as diverged:
            self.ex.diverge(diverged)
            raise
        except (Exception, Suspend) as changed:
            raise HistoryDivergedError(
                location=self.records[index].location, recorded=f"map item {index} succeeded",
                requested=f"map item {index} {'waiting' if isinstance(changed, Suspend) else 'raising'} "
                          f"{type(changed).__name__}", code_site=None,
                hint="An item that succeeded in history must replay as it ran: restore the code it ran.") from None

    async def _collect_rollbacks(self) -> None:
        """Rollback replays only: the items in flight replay to their first unfinished entry (registering their
        rollback handlers); nothing new starts."""
        stops: dict[int, BaseException] = {}
        for index in sorted(self.in_flight | set(self.queued)):
            try:
                await self._run_item(index, sealed=False)
            except BaseException as stop:  # RollbackStop as a rule; classified below
                stops[index] = stop
        raise_control({str(index): stop for index, stop in stops.items()})
        raise RollbackStop()

    async def _run_item(self, index: int, *, sealed: bool) -> Any:
        child = self.frame.child(self.records[index].location, token=self.token, sealed=sealed)
        running = self.fn(child.context(), self.ex.copy_output_value(self.items[index]))
        if not inspect.isawaitable(running):
            raise WorkflowDefinitionError(f'map "{self.entry.name}": fn must be an async function (ctx, item) -> '
                                          f"result; it returned {type(running).__name__}")
        value = await running
        child.scope.finish(self.fn)
        return to_json(value, f'the result of item {index} of map "{self.entry.name}"')

    async def _attempt(self, index: int) -> None:
        """Run one item in flight and take its outcome; never raises (control signals are kept for the map)."""
        try:
            value = await self._run_item(index, sealed=False)
        except HistoryDivergedError as diverged:
            self.ex.diverge(diverged)  # the wake-up stops: the other items start nothing new
            self.control[index] = diverged
        except Suspend as suspension:
            if self.decision is not None:
                self._record(index, EntryStatus.CANCELLED)
            else:
                self.suspensions[index] = suspension  # it keeps its slot
        except (BranchCancelled, asyncio.CancelledError) as cut:
            if self.token.is_cancelled():
                self._record(index, EntryStatus.CANCELLED)
            else:
                self.control[index] = cut
        except Exception as error:
            self._finished(index, EntryStatus.FAILED, error=error)
        except BaseException as stop:  # WakeAborted, WakeRestart, RollbackStop...
            self.control[index] = stop
        else:
            self._finished(index, EntryStatus.COMPLETED, value=value)
        finally:
            self.tasks.pop(index, None)

    def _record(self, index: int, status: EntryStatus, *, value: Any = None,
                error: BaseException | None = None) -> None:
        record = self.records[index]
        record.status = status
        record.output = value
        record.error = error_info(error) if error is not None else None
        self.ex.touch(record)
        self.in_flight.discard(index)

    def _finished(self, index: int, status: EntryStatus, *, value: Any = None,
                  error: BaseException | None = None) -> None:
        """An item succeeded or failed: record it, then decide, or fill the slot it freed (synchronously, in the
        item's own task: nothing else runs in between)."""
        self._record(index, status, value=value, error=error)
        self.finish_order.append(index)
        if status is EntryStatus.COMPLETED:
            self.succeeded += 1
        else:
            self.failed += 1
        if self.decision is None:
            self._decide()
            if self.decision is None and not self.ex.serial:
                self._fill()

    def _decide(self) -> None:
        self.decision = self.rule.decide(self.succeeded, self.failed)
        if self.decision is None:
            return
        self.token.cancelled = True
        current = asyncio.current_task()
        for task in self.tasks.values():
            if task is not current:
                task.cancel()

    def _stopped(self) -> bool:
        return (self.decision is not None or self.closing or bool(self.control) or self.ex.divergence is not None
                or self.token.is_cancelled())

    def _admit(self) -> None:
        """Fill the free slots: items an operator's resume restarted first, then new ones, in item order."""
        while not self._stopped() and len(self.in_flight) < self.limit:
            if self.queued:
                index = self.queued.popleft()
            elif len(self.records) < len(self.items):
                index = len(self.records)
                record = self.ex.new_entry(EntryKind.MAP_ITEM, f"{self.entry.location}/{index}", str(index))
                self.ex.touch(record)  # durable before the item's first side effect: it holds a slot from now on
                self.records.append(record)
            else:
                return
            self.in_flight.add(index)
            self.to_run[index] = None

    def _fill(self) -> None:
        self._admit()
        while self.to_run and not self._stopped():
            index = next(iter(self.to_run))
            del self.to_run[index]
            task = asyncio.ensure_future(self._attempt(index))
            self.tasks[index] = task
            task.add_done_callback(functools.partial(self._task_done, index))

    def _task_done(self, index: int, task: asyncio.Future[None]) -> None:
        """A task cancelled before it began never ran `_attempt` (nor its `finally`): its item is settled here."""
        self.tasks.pop(index, None)
        if not task.cancelled():
            return
        if self.token.is_cancelled():
            if self.records[index].status is EntryStatus.PENDING:
                self._record(index, EntryStatus.CANCELLED)
        else:
            self.control[index] = asyncio.CancelledError()

    async def _run_concurrently(self) -> None:
        self._fill()
        try:
            while self.tasks:
                await asyncio.wait(list(self.tasks.values()))
        except asyncio.CancelledError:
            # This map's own task was cancelled (say, it runs in a race branch that lost): its items go too, and
            # are waited for, or they would go on and commit after the wake-up has ended.
            self.closing = True
            for task in list(self.tasks.values()):
                task.cancel()
            while self.tasks:
                await asyncio.wait(list(self.tasks.values()))
            raise

    async def _run_serially(self) -> None:
        """One item at a time: of those in flight, one the attempt before finished first (see `hint`), else the
        lowest; the others keep their slots meanwhile."""
        while True:
            self._admit()
            if self._stopped() or not self.to_run:
                return
            index = self._pick()
            del self.to_run[index]
            await self._attempt(index)

    def _pick(self) -> int:
        while self.hint_at < len(self.hint):
            index = self.hint[self.hint_at]
            if index in self.to_run:
                self.hint_at += 1
                return index
            if index in self.suspensions or (index < len(self.records) and index not in self.in_flight
                                              and index not in self.queued):
                self.hint_at += 1  # done with in this run already (finished, or waiting)
                continue
            break  # not in flight yet: the others first, as in the attempt before
        return next(iter(self.to_run))

    # -- the outcome --------------------------------------------------------------------------------------------
    def _result(self) -> MapResult:
        copy = self.ex.copy_output_value
        outcomes: list[MapItem] = []
        for index, item in enumerate(self.items):
            record = self.records[index] if index < len(self.records) else None
            if record is None:
                outcomes.append(MapItem(index, copy(item), MapItemStatus.NOT_STARTED))
            elif record.status is EntryStatus.COMPLETED:
                outcomes.append(MapItem(index, copy(item), MapItemStatus.SUCCEEDED, value=copy(record.output)))
            elif record.status is EntryStatus.FAILED:
                err = record.error or ErrorInfo(type="Error", message="")
                outcomes.append(MapItem(index, copy(item), MapItemStatus.FAILED, error_type=err.type,
                                        error_message=err.message))
            else:
                outcomes.append(MapItem(index, copy(item), MapItemStatus.CANCELLED))
        result = MapResult(self.entry.name, tuple(outcomes))
        if self.entry.status is EntryStatus.FAILED:
            # Always the recorded form (the reason as recorded, the errors by type name and message), on the first
            # run as on replay: workflow code that inspects them decides the same way both times.
            reason = self.entry.error.message if self.entry.error is not None else "its completion rule failed"
            raise MapError(self.entry.name, reason, result.errors, result)
        return result
