"""`ctx.join` and `ctx.race`: parallel branches, each a scope of its own.

Branches that finished in history are re-run in replay (sealed: asking for anything new is a
divergence), so their rollback handlers are registered and their scopes validated on every
replay, also inside loop iterations that are replayed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dormant.workflow.entries import Entry
from dormant.workflow.errors import HistoryDivergedError, JoinError, RaceError, RecordedError
from dormant.workflow.execution import Execution, error_info, to_json
from dormant.workflow.frame import CancelToken, Frame
from dormant.workflow.history import BranchRecord, BranchStatus, EntryKind, EntryStatus, validate_name
from dormant.workflow.replay import user_code_site
from dormant.workflow.signals import BranchCancelled, RollbackStop, Suspend, raise_control

Branch = Callable[[Any], Awaitable[Any]]  # async def (ctx) -> value: the context is the frame's (Frame.context)


@dataclass(frozen=True)
class RaceResult:
    winner: str
    value: Any


def _open(frame: Frame, kind: EntryKind, name: str, branches: Mapping[str, Branch]) -> Entry:
    validate_name(name, kind.value)
    if not branches:
        raise ValueError(f'{kind.value} "{name}" needs at least one branch')
    for branch in branches:
        validate_name(branch, f"{kind.value} branch")
    ex, scope = frame.execution, frame.scope
    frame.check_cancelled()
    entry = scope.claim(kind, name)
    if entry is None:
        if ex.rolling_back:
            raise RollbackStop()
        entry = ex.new_entry(kind, scope.child(name), name, branches={b: BranchRecord() for b in branches})
        ex.touch(entry)
        return entry
    ex.replayed += 1
    if set(entry.branches) != set(branches):
        raise HistoryDivergedError(
            location=entry.location, recorded=f"{kind.value} branches {sorted(entry.branches)}",
            requested=f"{kind.value} branches {sorted(branches)}", code_site=user_code_site(),
            hint="Branches of a recorded join/race cannot change under a running actor.")
    return entry


def _settled(ex: Execution, entry: Entry, status: EntryStatus) -> None:
    """Record how a join or race ended (its entry's own status: pending while any branch may still run).
    Histories recorded before joins and races had one get it on their next run (a rollback only replays)."""
    if entry.status is not status and not ex.rolling_back:
        entry.status = status
        ex.touch(entry)


async def _run_branch(frame: Frame, entry: Entry, branch: str, fn: Branch,
                      token: CancelToken | None, sealed: bool) -> Any:
    child = frame.child(f"{entry.location}/{branch}", token=token, sealed=sealed)
    try:
        value = await fn(child.context())
        child.scope.finish(fn)
    except HistoryDivergedError as diverged:
        frame.execution.diverge(diverged)  # the wake-up stops: concurrent siblings start nothing new
        raise
    return to_json(value)


async def _settle(ex: Execution, runners: dict[str, Callable[[], Awaitable[Any]]],
                  stop_after_first: bool) -> dict[str, BaseException | None]:
    """Run branches (concurrently, or one by one in serial mode); map branch -> None or its exception."""
    outcomes: dict[str, BaseException | None] = {}
    if ex.serial or len(runners) <= 1:  # none left: every branch failed in history
        for branch, runner in runners.items():
            try:
                await runner()
                outcomes[branch] = None
                if stop_after_first:
                    break
            except BaseException as error:  # collected and classified by the caller
                outcomes[branch] = error
        for branch in runners:
            outcomes.setdefault(branch, BranchCancelled())
        return outcomes
    tasks = {branch: asyncio.ensure_future(runner()) for branch, runner in runners.items()}
    await _wait_all(tasks.values())
    for branch, task in tasks.items():
        if task.cancelled():
            outcomes[branch] = BranchCancelled()
        else:
            outcomes[branch] = task.exception()
    return outcomes


async def run_join(frame: Frame, name: str, branches: Mapping[str, Branch]) -> dict[str, Any]:
    ex = frame.execution
    entry = _open(frame, EntryKind.JOIN, name, branches)
    runners: dict[str, Callable[[], Awaitable[Any]]] = {}
    for branch, fn in branches.items():
        record = entry.branches[branch]
        if record.status is BranchStatus.FAILED:
            continue
        sealed = record.status is BranchStatus.COMPLETED

        async def runner(branch: str = branch, fn: Branch = fn, sealed: bool = sealed) -> None:
            value = await _run_branch(frame, entry, branch, fn, None, sealed)
            record = entry.branches[branch]
            if record.status is not BranchStatus.COMPLETED:
                record.status = BranchStatus.COMPLETED
                record.output = value
                ex.touch(entry)

        runners[branch] = runner
    outcomes = await _settle(ex, runners, stop_after_first=False)
    raise_control(outcomes)
    suspensions = [o for o in outcomes.values() if isinstance(o, Suspend)]
    for branch, outcome in outcomes.items():
        if isinstance(outcome, Exception):
            entry.branches[branch] = BranchRecord(status=BranchStatus.FAILED, error=error_info(outcome))
            ex.touch(entry)
    if suspensions:
        raise Suspend.merge(suspensions)
    failed = {b: RecordedError(r.error.type, r.error.message) if r.error else RecordedError("Error", "")
              for b, r in entry.branches.items() if r.status is BranchStatus.FAILED}
    if failed:
        _settled(ex, entry, EntryStatus.FAILED)
        # Always the recorded form (type name + message), on the first run as on replay: workflow code
        # that inspects the errors must decide the same way both times.
        raise JoinError(name, dict(failed))
    _settled(ex, entry, EntryStatus.COMPLETED)
    return {b: ex.copy_output_value(entry.branches[b].output) for b in branches}


async def run_race(frame: Frame, name: str, branches: Mapping[str, Branch]) -> RaceResult:
    ex = frame.execution
    entry = _open(frame, EntryKind.RACE, name, branches)
    if entry.winner is not None:
        # Re-run the winner sealed (registers its rollback handlers, validates its scope).
        await _run_branch(frame, entry, entry.winner, branches[entry.winner], None, True)
        _settled(ex, entry, EntryStatus.COMPLETED)
        return RaceResult(entry.winner, ex.copy_output_value(entry.branches[entry.winner].output))
    if ex.rolling_back:
        raise RollbackStop()
    token = CancelToken(frame.cancel)
    tasks: dict[str, asyncio.Future[Any]] = {}
    runners: dict[str, Callable[[], Awaitable[Any]]] = {}
    for branch, fn in branches.items():
        if entry.branches[branch].status is not BranchStatus.PENDING:
            continue

        async def runner(branch: str = branch, fn: Branch = fn) -> None:
            value = await _run_branch(frame, entry, branch, fn, token, False)
            record = entry.branches[branch]
            record.status = BranchStatus.COMPLETED
            record.output = value
            if entry.winner is None:
                entry.put("winner", branch)
                ex.race_winners.setdefault(entry.location, branch)
                token.cancelled = True
                current = asyncio.current_task()
                for other in tasks.values():
                    if other is not current:
                        other.cancel()
            ex.touch(entry)

        runners[branch] = runner
    hint = ex.race_winners.get(entry.location)
    if ex.serial and hint in runners:
        runners = {hint: runners[hint]} | {b: r for b, r in runners.items() if b != hint}
    outcomes = await _settle_race(ex, runners, tasks)
    raise_control({b: o for b, o in outcomes.items() if not isinstance(o, BranchCancelled)})
    for branch, outcome in outcomes.items():
        record = entry.branches[branch]
        # A loser that had suspended (e.g. on its sleep) before the winner finished lost as well.
        lost = isinstance(outcome, BranchCancelled | asyncio.CancelledError) or (
            isinstance(outcome, Suspend) and entry.winner is not None)
        if lost and record.status is BranchStatus.PENDING:
            entry.branches[branch] = BranchRecord(status=BranchStatus.CANCELLED)
        elif isinstance(outcome, Exception) and record.status is BranchStatus.PENDING:
            entry.branches[branch] = BranchRecord(status=BranchStatus.FAILED, error=error_info(outcome))
    ex.touch(entry)
    if entry.winner is not None:
        _settled(ex, entry, EntryStatus.COMPLETED)
        return RaceResult(entry.winner, ex.copy_output_value(entry.branches[entry.winner].output))
    suspensions = [o for o in outcomes.values() if isinstance(o, Suspend)]
    if suspensions:
        raise Suspend.merge(suspensions)
    errors: dict[str, Exception] = {
        b: RecordedError(r.error.type, r.error.message) for b, r in entry.branches.items() if r.error is not None}
    _settled(ex, entry, EntryStatus.FAILED)
    raise RaceError(name, errors)


async def _settle_race(ex: Execution, runners: dict[str, Callable[[], Awaitable[Any]]],
                       tasks: dict[str, asyncio.Future[Any]]) -> dict[str, BaseException | None]:
    if ex.serial or len(runners) <= 1:  # none left: every branch failed in history
        return await _settle(ex, runners, stop_after_first=True)
    for branch, runner in runners.items():
        tasks[branch] = asyncio.ensure_future(runner())
    await _wait_all(tasks.values())
    return {b: (BranchCancelled() if t.cancelled() else t.exception()) for b, t in tasks.items()}


async def _wait_all(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Wait for every branch task. If this task is cancelled meanwhile (it is itself a losing race
    branch), cancel the branch tasks too and wait for them: left running, they would go on and
    commit after the wake-up has ended."""
    pending = list(tasks)
    try:
        await asyncio.wait(pending)
    except asyncio.CancelledError:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending)
        raise
