"""The DynamoDB store's commit items are byte for byte what they were before a commit serialized each new value
once (issue 28): every ring item's payload is zlib.compress(compact JSON of the payload, 6), deltas and snapshots,
with values offloaded to S3 as references."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from dormant.dynamodb.items import commit_payload, dumps
from dormant.dynamodb.store import DynamoEventStore
from dormant.s3.offload import MARKER
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.contract.conftest import Backend
from tests.contract.support import T0, created, draft

pytestmark = pytest.mark.parametrize("backend", ["dynamodb_local", "moto"], indirect=True)


def _entry(seq: int, output: Any) -> dict[str, Any]:
    return {"location": f"step-{seq}", "kind": "step", "name": f"step {seq}", "seq": seq, "status": "completed",
            "output": output, "attempts": 1, "created_at": T0 + seq, "updated_at": T0 + seq + 0.25}


async def test_commit_items_hold_exactly_the_compressed_json_of_their_payloads(backend: Backend) -> None:
    base = backend.store
    assert isinstance(base, DynamoEventStore)
    settings = base.settings.model_copy(update={"snapshot_every": 4})
    store = DynamoEventStore(base.client, settings, clock=backend.clock, blobs=base.values.blobs)
    actor = await created(store)
    big = "ü" + "x" * (settings.offload_threshold_bytes + 10)  # offloaded: the items hold a reference
    outputs: list[Any] = [{"n": 1.5, "text": "héllo", "list": [None, True, -3, 1e-5]}, big, {"big": big, "k": "v"},
                          7, "plain"]
    version = 1
    for seq, output in enumerate(outputs, start=1):
        state: dict[str, Any] = {"value": seq, "note": "ß" * seq} if seq != 3 else {"value": seq, "blob": big}
        workflow = WorkflowRecord(state=WorkflowState.COMPLETED if seq == len(outputs) else WorkflowState.RUNNING,
                                  output=output if seq == len(outputs) else None)
        version = await store.commit(actor, version, draft(upserts=[_entry(seq, output)], state=state,
                                                           workflow=workflow, at=T0 + seq, responses={},
                                                           events=[("done", {"seq": seq})] if seq == 2 else []))
    items = sorted(await store.ring.items(actor), key=lambda item: int(item["v"]["N"]))
    assert [int(item["v"]["N"]) for item in items] == [3, 4, 5, 6]  # (a ring of 4 slots)
    snapshots = [int(item["v"]["N"]) for item in items if "snap" in item]
    assert snapshots and len(snapshots) < len(items)  # snapshots and deltas (one due early: the big values weigh)
    texts = [zlib.decompress(item["z"]["B"]).decode() for item in items]
    assert all(MARKER in text for text in texts[:2])  # offloaded values are references (v3's entry, v4's state)
    for item in items:  # what compress(payload) wrote before: the payload's compact JSON as one text
        assert item["z"]["B"] == zlib.compress(dumps(commit_payload(item)).encode(), 6)
    loaded = await DynamoEventStore(base.client, settings, blobs=base.values.blobs).load(actor)
    assert loaded is not None and loaded.version == version
    assert [e.output for e in loaded.history] == outputs and loaded.workflow.output == "plain"
