"""What a waiting send reads from one load of the actor (dormant.runtime.replies.unanswered): when an answer
can still come, and when the wait may end at once."""

from __future__ import annotations

from typing import Any

import pytest

from dormant.ports import ActorMeta, ActorRef, ActorSnapshot, InboxMessage
from dormant.runtime.replies import unanswered
from dormant.workflow.history import (
    EntryKind,
    EntryStatus,
    HistoryEntry,
    RecordedMessage,
    WorkflowRecord,
    WorkflowState,
)

REF = ActorRef(name="desk", key=("k",))


def snapshot(history: list[HistoryEntry], *, state: WorkflowState = WorkflowState.SLEEPING,
             inbox: tuple[str, ...] = ()) -> ActorSnapshot:
    return ActorSnapshot(ref=REF, version=3, meta=ActorMeta(name="desk", key=("k",), created_at=0.0), state={},
                         workflow=WorkflowRecord(state=state), history=history,
                         inbox=[InboxMessage(id=i, queue="ask", body={}, created_at=0.0) for i in inbox])


def receipt(location: str, *, seq: int = 5, **message: Any) -> HistoryEntry:
    return HistoryEntry(location=location, kind=EntryKind.MESSAGE, name=location.rsplit("/", 1)[-1], seq=seq,
                        status=EntryStatus.COMPLETED,
                        messages=[RecordedMessage(id="m", name="ask", body={}, created_at=0.0, **message)])


def loop(location: str, iteration: int, *, seq: int = 1, done: bool = False) -> HistoryEntry:
    return HistoryEntry(location=location, kind=EntryKind.LOOP, name=location.rsplit("/", 1)[-1], seq=seq,
                        iteration=iteration, status=EntryStatus.COMPLETED if done else EntryStatus.PENDING)


def outcome(found: Any) -> tuple[str, WorkflowState | None] | None:
    return None if found is None else (found.status, found.workflow)


def test_a_pending_message_of_a_running_actor_may_still_be_answered() -> None:
    assert unanswered(snapshot([], inbox=("m",)), "m") is None


@pytest.mark.parametrize("state", [WorkflowState.FAILED, WorkflowState.DIVERGED, WorkflowState.ROLLING_BACK,
                                   WorkflowState.COMPLETED, WorkflowState.TERMINATED])
def test_a_stopped_or_ended_workflow_ends_the_wait_with_where_the_message_is(state: WorkflowState) -> None:
    assert outcome(unanswered(snapshot([], state=state, inbox=("m",)), "m")) == ("queued", state)
    taken = snapshot([receipt("take", completable=True)], state=state)
    assert outcome(unanswered(taken, "m")) == ("received", state)


@pytest.mark.parametrize("state", [WorkflowState.COMPLETED, WorkflowState.TERMINATED])
def test_a_message_taken_without_an_answer_before_the_workflow_ended_is_received(state: WorkflowState) -> None:
    """The workflow processed it and went on to its end: nothing went wrong with this message."""
    taken = snapshot([receipt("take", completable=False)], state=state)
    assert outcome(unanswered(taken, "m")) == ("received", None)


def test_a_message_gone_without_a_trace_from_a_terminated_workflow_was_discarded() -> None:
    assert outcome(unanswered(snapshot([], state=WorkflowState.TERMINATED), "m")) == \
        ("queued", WorkflowState.TERMINATED)
    assert outcome(unanswered(snapshot([], state=WorkflowState.COMPLETED), "m")) == ("received", None)


def test_an_open_completable_receive_may_still_be_answered() -> None:
    assert unanswered(snapshot([receipt("take", completable=True)]), "m") is None
    inside = snapshot([loop("serve", 4), receipt("serve/~4/take", completable=True)])
    assert unanswered(inside, "m") is None


def test_a_receive_that_does_not_answer_ends_the_wait() -> None:
    assert outcome(unanswered(snapshot([receipt("take", completable=False)]), "m")) == ("received", None)


def test_a_receive_recorded_before_receives_said_whether_they_answer_keeps_the_wait() -> None:
    """Histories written before `completable` was recorded: an answer may come, so keep waiting."""
    assert unanswered(snapshot([receipt("take")]), "m") is None


def test_a_completed_message_is_left_to_the_response_read() -> None:
    assert unanswered(snapshot([receipt("take", completable=True, completed=True)]), "m") is None


@pytest.mark.parametrize("history", [
    [loop("serve", 5), receipt("serve/~4/take", completable=True)],  # the loop has moved on
    [loop("serve", 4, done=True), receipt("serve/~4/take", completable=True)],  # the loop broke out
    [loop("outer", 2), loop("outer/~1/inner", 0, seq=2), receipt("outer/~1/inner/~0/take", completable=True)],
    [receipt("outer/~1/inner/~0/take", completable=True)],  # the loops themselves compacted away
], ids=["moved-on", "broke-out", "outer-iteration-over", "compacted"])
def test_a_completable_receive_whose_iteration_is_over_ends_the_wait(history: list[HistoryEntry]) -> None:
    assert outcome(unanswered(snapshot(history), "m")) == ("received", None)


def test_a_message_gone_from_inbox_and_history_was_taken_by_a_compacted_iteration() -> None:
    assert outcome(unanswered(snapshot([loop("serve", 9)]), "m")) == ("received", None)
