"""`Frame` (dormant.workflow.frame): what a primitive sees of its scope: child scopes with their recorded entries,
the checkpoint and cancellation they inherit, the context made for them, and the checks before every entry."""

from __future__ import annotations

from typing import Any, cast

import pytest
from pydantic import BaseModel

from dormant.workflow.errors import HistoryDivergedError
from dormant.workflow.execution import Execution
from dormant.workflow.frame import CancelToken, Frame
from dormant.workflow.history import EntryKind, EntryStatus, HistoryEntry, WorkflowRecord
from dormant.workflow.host import CommitDraft
from dormant.workflow.replay import Scope
from dormant.workflow.signals import BranchCancelled
from dormant.workflow.state_cell import StateCell


class Empty(BaseModel):
    pass


async def nowhere(_: CommitDraft) -> None:
    """Commits go nowhere: nothing here commits."""


def execution(*entries: HistoryEntry) -> Execution:
    return Execution(host=cast(Any, None), entries=entries, record=WorkflowRecord(), state=StateCell(Empty, {}),
                     inbox=[], now=lambda: 0.0, checkpointer=nowhere)


def step(location: str, seq: int) -> HistoryEntry:
    return HistoryEntry(location=location, kind=EntryKind.STEP, name=location.rsplit("/", 1)[-1], seq=seq,
                        status=EntryStatus.COMPLETED)


def made(frame: Frame) -> tuple[str, Frame]:
    return ("context of", frame)


def test_a_child_frame_replays_its_own_entries_and_inherits_checkpoint_and_cancellation() -> None:
    ex = execution(step("a", 1), step("loop/~0/b", 2), step("loop/~0/c", 3), step("loop/~1/d", 4))
    root_scope = Scope("", ex.index.children(""), checkpointed=True)
    race = CancelToken(None)
    root = Frame(ex, root_scope, made, race)

    child = root.child("loop/~0")
    assert child.execution is ex and child.cancel is race and child.scope.location == "loop/~0"
    assert child.scope.checkpointed and not child.scope.sealed
    assert child.scope.claim(EntryKind.STEP, "b") is not None and child.scope.claim(EntryKind.STEP, "c") is not None
    assert child.scope.claim(EntryKind.STEP, "new") is None  # recorded ones first, then new ones

    item = CancelToken(race, reason="its map was decided")
    sealed = root.child("loop/~1", token=item, sealed=True)
    assert sealed.cancel is item and sealed.scope.sealed
    assert sealed.context() == ("context of", sealed)  # the factory the root was given makes every context


def test_check_cancelled_raises_a_divergence_first_then_the_innermost_cancellation() -> None:
    ex = execution()
    race = CancelToken(None)
    item = CancelToken(race, reason="its map was decided")
    frame = Frame(ex, Scope("", [], checkpointed=False), made, item)
    outside = Frame(ex, Scope("", [], checkpointed=False), made)

    frame.check_cancelled()  # nothing decided yet
    assert frame.cancelled_by() is None and outside.cancelled_by() is None

    race.cancelled = True
    with pytest.raises(BranchCancelled):
        frame.check_cancelled()
    assert frame.cancelled_by() is race
    item.cancelled = True
    assert frame.cancelled_by() is item  # the innermost decided token says why

    diverged = HistoryDivergedError(location="x", recorded=None, requested='step "x"', code_site=None, hint="")
    ex.diverge(diverged)
    for each in (frame, outside):
        with pytest.raises(HistoryDivergedError) as raised:
            each.check_cancelled()
        assert raised.value is diverged
