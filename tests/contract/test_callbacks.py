"""Callback lookup records: a commit's draft opens and closes them (an open record written once, a closed one only
over an open one), heartbeats move an open one's deadline forward only, and a record outlives its actor, on every
backend. The DynamoDB item itself, request costs and a crash between a commit and its lookup write are in
tests/integration/test_callbacks_aws.py."""

from __future__ import annotations

from typing import Any

from dormant.core.callbacks import CALLBACK_RETENTION
from dormant.ports import EventStore
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import CallbackChange
from tests.contract.support import T0, created


def callback_change(state: str, **fields: Any) -> CallbackChange:
    values: dict[str, Any] = {"token_hash": "f" * 64, "callback_id": "f" * 32, "name": "approval",
                              "location": "loop/~3/approval", "state": state, "deadline": T0 + 1000,
                              "heartbeat_timeout": 100.0, "heartbeat_deadline": T0 + 100, "at": T0 + 1}
    return CallbackChange(**{**values, **fields})


async def test_callback_records_open_once_close_once_and_heartbeats_only_move_forward(store: EventStore) -> None:
    actor = await created(store)
    assert await store.read_callback("f" * 64) is None
    version = await store.commit(actor, 1, CommitDraft(upserts=[], deleted_prefixes=[], state=None,
                                                           consumed_ids=[], responses={}, events=[], workflow=None,
                                                           committed_at=T0 + 1, callbacks=[callback_change("open")]))
    record = await store.read_callback("f" * 64)
    assert record is not None
    assert (record.ref, record.actor_created_at, record.state, record.version) == (actor, T0, "open", version)
    assert (record.name, record.location, record.deadline, record.heartbeat_deadline, record.expires_at) == (
        "approval", "loop/~3/approval", T0 + 1000, T0 + 100, T0 + 1000 + CALLBACK_RETENTION)
    assert await store.heartbeat_callback("f" * 64, T0 + 150, T0 + 50)
    assert await store.heartbeat_callback("f" * 64, T0 + 120, T0 + 60)  # an older heartbeat: stays at 150
    assert (await store.read_callback("f" * 64)).heartbeat_deadline == T0 + 150  # type: ignore[union-attr]
    # A commit writing the open record again (a re-settled version) never undoes a heartbeat.
    version = await store.commit(actor, version, CommitDraft(
        upserts=[], deleted_prefixes=[], state={"value": 1}, consumed_ids=[], responses={}, events=[],
        workflow=None, committed_at=T0 + 2, callbacks=[callback_change("open")]))
    assert (await store.read_callback("f" * 64)).heartbeat_deadline == T0 + 150  # type: ignore[union-attr]
    assert not await store.heartbeat_callback("f" * 64, T0 + 400, T0 + 150)  # missed: the deadline has passed
    assert not await store.heartbeat_callback("0" * 64, T0 + 400, T0 + 10)  # no such callback
    version = await store.commit(actor, version, CommitDraft(
        upserts=[], deleted_prefixes=[], state={"value": 2}, consumed_ids=[], responses={}, events=[], workflow=None,
        committed_at=T0 + 3, callbacks=[callback_change("completed", at=T0 + 3)]))
    closed = await store.read_callback("f" * 64)
    assert closed is not None and (closed.state, closed.version, closed.expires_at) == (
        "completed", version, T0 + 3 + CALLBACK_RETENTION)
    assert not await store.heartbeat_callback("f" * 64, T0 + 400, T0 + 4)  # closed: takes no heartbeats
    await store.commit(actor, version, CommitDraft(
        upserts=[], deleted_prefixes=[], state={"value": 3}, consumed_ids=[], responses={}, events=[], workflow=None,
        committed_at=T0 + 4, callbacks=[callback_change("open"), callback_change("timed_out", at=T0 + 4)]))
    assert (await store.read_callback("f" * 64)).state == "completed"  # type: ignore[union-attr]  # closed once
    assert await store.delete(actor)
    assert (await store.read_callback("f" * 64)) is not None  # outlives its actor (the API refuses it then)
