"""Issue 26, item 2: the room kept for a failure (dormant.core.limits.RECORD_ROOM), the rule itself, without a server.

A history grown to the item limit one entry at a time, at every byte offset of an entry's size: the commit that
would take the room kept for a failure is refused, and the commit that marks the workflow failed
(dormant.runtime.failure_record.failure_mark) is always taken, and so are a resume and the end of a fixed workflow
after it."""

from __future__ import annotations

from typing import Any

import pytest

from dormant.core.limits import FAILURE_TEXT, RECORD_ROOM, json_bytes
from dormant.dynamodb.items import ITEM_LIMIT, Head, Side
from dormant.dynamodb.ring import delta_of
from dormant.dynamodb.sizes import SizeChecks
from dormant.errors import ItemTooLargeError
from dormant.ports import ActorRef
from dormant.runtime.failure_record import CUT_NOTE, failure_mark
from dormant.runtime.operations import reset_failure
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import ErrorInfo, OperatorNote, WorkflowRecord, WorkflowState

REF = ActorRef(name="stepper", key=("k",))
RUNNING = WorkflowRecord(state=WorkflowState.RUNNING)
LONG_ERROR = ItemTooLargeError("the live history and state of version 1,840 of an actor of type 'stepper' is "
                               "400,013 bytes, over the limit (stored item): " + "é\"\n" * 2_000)


def created(filler: int, record: WorkflowRecord = RUNNING) -> Head:
    """Version 1 with one entry holding `filler` bytes of output."""
    full = {"meta": {"name": REF.name, "key": list(REF.key), "created_at": 0.0, "input": None}, "state": {},
            "workflow": record.model_dump(mode="json"), "search": {}, "since": 0.0, "seq": 0,
            "history": {"filler": step("filler", "f" * filler)}}
    return Head.from_snapshot(1, 100, full, Side())


def step(location: str, output: str) -> dict[str, Any]:
    return {"location": location, "kind": "step", "status": "completed", "output": output, "attempts": 1,
            "started_at": 1.5, "ended_at": 1.5, "updated_at": 1.5}


def draft(upserts: list[dict[str, Any]] | None = None, workflow: WorkflowRecord | None = None,
          **more: Any) -> CommitDraft:
    fields: dict[str, Any] = {"deleted_prefixes": [], "state": None, "consumed_ids": [], "responses": {},
                              "events": [], "committed_at": 2.0, **more}
    return CommitDraft(upserts=upserts or [], workflow=workflow, **fields)


def commit(checks: SizeChecks, base: Head, changes: CommitDraft) -> Head:
    """What DynamoEventStore.commit and check_commit do before writing: the version `changes` make, checked."""
    side, delta = delta_of(base, changes, 2.0)
    head = base.advance(base.version + 1, delta, side)
    checks.live(REF, head, side, base)
    return head


def live_size(head: Head) -> int:
    return head.full_bytes() + 256  # SNAPSHOT_OVERHEAD, as SizeChecks.live counts a version


def grow_until_refused(checks: SizeChecks, head: Head, pad: int) -> tuple[Head, int]:
    """Entries of one size, one commit each, until one is refused: the last version taken, and how many were."""
    for index in range(10_000):
        try:
            head = commit(checks, head, draft([step(f"s{index}", "p" * pad)], RUNNING if index == 0 else None))
        except ItemTooLargeError as refused:
            assert "kept free to record a failure" in str(refused) and "stored item" in str(refused)
            return head, index
    raise AssertionError("never refused")


@pytest.mark.parametrize(("limit", "pad"), [(12_000, 97), (12_000, 180), (ITEM_LIMIT, 123)])
def test_at_every_byte_offset_the_failure_fits_and_so_do_a_resume_and_a_fix(limit: int, pad: int) -> None:
    checks = SizeChecks(limit)
    entry = json_bytes(step("s0", "p" * pad))
    near = limit - RECORD_ROOM.maximum - 5 * entry  # a few entries below the kept room
    offsets = set()
    for filler in range(near - entry, near + 1):  # every offset of the crossing within one entry's size
        head, taken = grow_until_refused(checks, created(filler), pad)
        assert taken >= 2
        # Tight: the last version leaves the room (and less than one more entry beside it).
        room_left = limit - RECORD_ROOM.maximum - live_size(head)
        assert 0 <= room_left < entry + 16
        offsets.add(room_left)
        failed = commit(checks, head, draft(workflow=failure_mark(WorkflowRecord(**head.workflow), LONG_ERROR)))
        assert live_size(failed) <= limit
        entries, record = reset_failure([], WorkflowRecord(**failed.workflow))  # `dormant resume`
        resumed = commit(checks, failed, draft([e.model_dump(mode="json", exclude_defaults=True) for e in entries],
                                               record))
        done = commit(checks, resumed, draft(workflow=record.model_copy(update={"state": WorkflowState.COMPLETED,
                                                                                   "output": "fixed"})))
        with pytest.raises(ItemTooLargeError):  # but the resumed workflow cannot add the step refused before
            commit(checks, resumed, draft([step(f"s{taken}", "p" * pad)]))
        assert done.workflow["state"] == "completed"
    assert len(offsets) > entry // 2  # the crossings fell at (nearly) every offset


def test_only_a_commit_adding_nothing_but_a_small_record_may_use_the_room() -> None:
    checks = SizeChecks(12_000)
    head, _ = grow_until_refused(checks, created(8_000), 50)
    failed = commit(checks, head, draft(workflow=failure_mark(RUNNING, LONG_ERROR)))
    assert live_size(failed) + RECORD_ROOM.maximum > 12_000  # it did take some of the room
    with pytest.raises(ItemTooLargeError):  # a response is not a record
        commit(checks, head, draft(workflow=failure_mark(RUNNING, LONG_ERROR), responses={"m": "ok"}))
    with pytest.raises(ItemTooLargeError):  # nor an event
        commit(checks, head, draft(workflow=failure_mark(RUNNING, LONG_ERROR), events=[("e", 1)]))
    with pytest.raises(ItemTooLargeError):  # nor is a record bigger than the room (a big workflow result)
        commit(checks, head, draft(workflow=RUNNING.model_copy(update={"output": "o" * RECORD_ROOM.maximum})))
    with pytest.raises(ItemTooLargeError):  # an entry that grows in place
        commit(checks, head, draft([step("s0", "p" * 51)], failure_mark(RUNNING, LONG_ERROR)))
    shrunk = commit(checks, head, draft([step("s0", "")], failure_mark(RUNNING, LONG_ERROR)))  # one that shrinks
    assert shrunk.history["s0"]["output"] == ""
    with pytest.raises(ItemTooLargeError):  # and the first version never takes it
        checks.live(REF, created(12_000 - RECORD_ROOM.maximum), Side(), None)


def test_the_failure_mark_is_bounded_whatever_the_error_and_the_record() -> None:
    noted = OperatorNote(action="reset", by="user:" + "u" * 3_000, reason="r" * 5_000, at=1.0, detail="d" * 500,
                         version=3)
    waiting = RUNNING.model_copy(update={"waiting_for": ["w" * 1_000] * 5, "deadline": 5.0, "limits": ["l"] * 9,
                                         "output": "o" * 10_000})
    for record in (RUNNING, waiting, RUNNING.model_copy(update={"rewritten": noted})):
        for error in (LONG_ERROR, ItemTooLargeError("short"), ItemTooLargeError("\n" * 50_000)):
            mark = failure_mark(record, error)
            assert json_bytes(mark.model_dump(mode="json")) <= RECORD_ROOM.maximum
            assert mark.state is WorkflowState.FAILED and mark.error is not None
            assert mark.error.type == "ItemTooLargeError" and not mark.waiting_for and mark.deadline is None
            assert json_bytes(mark.error.message) - 2 <= FAILURE_TEXT.maximum
    mark = failure_mark(RUNNING, LONG_ERROR)
    assert mark.error is not None and mark.error.message.endswith(CUT_NOTE)
    assert mark.error.message.startswith("the live history and state of version 1,840")
    assert failure_mark(RUNNING, ItemTooLargeError("short")).error == ErrorInfo(type="ItemTooLargeError",
                                                                                message="short")
    kept = failure_mark(RUNNING.model_copy(update={"rewritten": noted.model_copy(update={"by": "u", "reason": "r"})}),
                        LONG_ERROR)
    assert kept.rewritten is not None  # operator notes stay when they fit beside the error
