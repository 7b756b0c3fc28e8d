"""The listed status a DynamoDB head carries (issue 29: the listing moves at a wake-up's last commit): a snapshot
written before the head carried it (no "listed" in its payload) lists as its workflow state did then, and a commit
decides from the head's listed status, not its state (dormant.core.records.listed_after)."""

from __future__ import annotations

from typing import Any

import pytest

from dormant.core.records import listed_after
from dormant.dynamodb.items import Head, Side
from dormant.workflow.history import WorkflowState


def full(state: str, **more: Any) -> dict[str, Any]:
    return {"meta": {"name": "counter", "key": ["a"], "created_at": 1.0}, "state": {}, "workflow": {"state": state},
            "history": {}, "seq": 0, "search": {}, "since": 1.0, **more}


@pytest.mark.parametrize(("state", "listed"), [("pending", "pending"), ("running", "sleeping"),
                                               ("sleeping", "sleeping"), ("completed", "completed")])
def test_a_snapshot_written_before_the_field_lists_as_its_state_did(state: str, listed: str) -> None:
    head = Head.from_snapshot(3, 16, full(state), Side(at=1.0))
    assert head.listed == listed


def test_the_listed_status_rides_in_the_snapshot_and_follows_the_commits_that_move_it() -> None:
    head = Head.from_snapshot(1, 16, full("running", listed="pending"), Side(at=1.0))
    assert head.listed == "pending" and head.full()["listed"] == "pending"
    kept = head.advance(2, {"u": [], "x": []}, Side(at=2.0))  # a commit that did not move the listing
    assert (kept.listed, kept.since) == ("pending", 1.0)
    moved = kept.advance(3, {"u": [], "x": []}, Side(at=3.0, listed=("sleeping", 3.0)))
    assert (moved.listed, moved.since) == ("sleeping", 3.0) and moved.full()["listed"] == "sleeping"


@pytest.mark.parametrize(("previous", "state", "listed"), [
    ("pending", "running", "pending"), ("sleeping", "running", "sleeping"), ("completed", "running", "sleeping"),
    ("failed", "running", "sleeping"), ("paused", "running", "sleeping"), ("pending", "sleeping", "sleeping"),
    ("sleeping", "completed", "completed"), ("pending", "pending", "pending")])
def test_running_keeps_a_pending_or_sleeping_listing_and_nothing_else(previous: str, state: str, listed: str) -> None:
    assert listed_after(WorkflowState(previous), WorkflowState(state)) is WorkflowState(listed)
