"""The AWS durable execution SDK's side of benchmarks/peers.py (run by the venv that holds the SDK, 3.0.0; it imports
nothing of Dormant): its `durable_execution` handler, invoked in-process on a fake of the checkpoint service.

The fake (`FakeService`) is what the SDK's `DurableServiceClient` talks to: it applies each checkpoint's updates to
operations it keeps in their wire form (dicts, as the service's API returns them) and returns the changed ones, as the
service does. A replay is an invocation whose input carries the stored operations, parsed by the SDK from that wire
form inside the measured window (as Dormant's load is inside its own). Prints one JSON line {row: value}: CPU seconds
per item (process time: the SDK checkpoints from a background thread), memory bytes per item (tracemalloc's peak of one
invocation beyond a 100-step one's).
"""

from __future__ import annotations

import gc
import json
import logging
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

from aws_durable_execution_sdk_python import DurableContext, StepContext, durable_execution
from aws_durable_execution_sdk_python.config import Duration, MapConfig
from aws_durable_execution_sdk_python.execution import (
    DurableExecutionInvocationInput,
    DurableExecutionInvocationInputWithClient,
)
from aws_durable_execution_sdk_python.lambda_service import (
    CheckpointOutput,
    CheckpointUpdatedExecutionState,
    Operation,
    OperationUpdate,
    StateOutput,
)

logging.disable(logging.CRITICAL)


class FakeService:
    """The checkpoint service, in memory: one execution's operations by id, in their wire form."""

    def __init__(self, input_payload: dict[str, Any]) -> None:
        self.arn = f"arn:aws:lambda:us-east-1:000000000000:function:bench/durable-execution/{uuid.uuid4()}"
        self.operations: dict[str, dict[str, Any]] = {self.arn.split("/")[-1]: {
            "Id": self.arn.split("/")[-1], "Type": "EXECUTION", "Status": "STARTED",
            "ExecutionDetails": {"InputPayload": json.dumps(input_payload)}}}
        self.tokens = 0

    def checkpoint(self, durable_execution_arn: str, checkpoint_token: str, updates: list[OperationUpdate],
                   client_token: str | None) -> CheckpointOutput:
        changed = []
        for update in updates:
            wire = update.to_dict()
            op = self.operations.setdefault(wire["Id"], {"Id": wire["Id"], "Type": wire["Type"]})
            for key in ("ParentId", "Name", "SubType"):
                if key in wire:
                    op[key] = wire[key]
            action = wire["Action"]
            op["Status"] = {"START": "STARTED", "SUCCEED": "SUCCEEDED", "FAIL": "FAILED", "RETRY": "PENDING",
                            "CANCEL": "CANCELLED"}[action]
            if wire["Type"] == "STEP":
                op["StepDetails"] = {"Attempt": 1, **({"Result": wire["Payload"]} if "Payload" in wire else {})}
            elif wire["Type"] == "CONTEXT" and action != "START":
                op["ContextDetails"] = {"Result": wire.get("Payload")}
            elif wire["Type"] == "WAIT":
                op["WaitDetails"] = {}
            changed.append(Operation.from_dict(op))
        self.tokens += 1
        return CheckpointOutput(checkpoint_token=f"t{self.tokens}",
                                new_execution_state=CheckpointUpdatedExecutionState(operations=changed))

    def get_execution_state(self, durable_execution_arn: str, checkpoint_token: str, next_marker: str,
                            max_items: int = 1000) -> StateOutput:
        return StateOutput(operations=[], next_marker=None)

    def invoke(self, handler: Callable[[Any, Any], Any]) -> dict[str, Any]:
        """One invocation: the event built from the stored operations (parsed by the SDK), then the handler."""
        event = DurableExecutionInvocationInput.from_dict({
            "DurableExecutionArn": self.arn, "CheckpointToken": f"t{self.tokens}",
            "InitialExecutionState": {"Operations": list(self.operations.values())}})
        result: dict[str, Any] = handler(
            DurableExecutionInvocationInputWithClient.from_durable_execution_invocation_input(event, self), None)
        return result


def _one(_: StepContext) -> int:
    return 1


@durable_execution
def steps(event: dict[str, Any], ctx: DurableContext) -> int:
    """N steps; with `wait`, then a wait (the replay case: a later invocation replays the steps, suspends again)."""
    total = 0
    for i in range(int(event["steps"])):
        total += ctx.step(_one, name=f"s{i}")
    if event.get("wait"):
        ctx.wait(Duration.from_seconds(3600), name="w")
    return total


def _item(ctx: DurableContext, item: int, index: int, items: Any) -> int:
    return ctx.step(_one, name="work") + item


@durable_execution
def mapped(event: dict[str, Any], ctx: DurableContext) -> int:
    result = ctx.map(list(range(int(event["items"]))), _item, name="items", config=MapConfig(max_concurrency=50))
    return len(result.get_results())


def _cpu(work: Callable[[], Any]) -> float:
    gc.collect()
    start = time.process_time()
    work()
    return time.process_time() - start


def _peak(work: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _done(output: dict[str, Any], status: str) -> dict[str, Any]:
    if output.get("Status") != status:
        raise RuntimeError(f"expected {status}: {output}")
    return output


def fresh(n: int) -> FakeService:
    return FakeService({"steps": n})


def replayable(n: int) -> FakeService:
    """An execution suspended in its wait after n steps."""
    service = FakeService({"steps": n, "wait": True})
    _done(service.invoke(steps), "PENDING")
    return service


def measure(n: int) -> dict[str, float]:
    rows: dict[str, float] = {}
    service = fresh(n)
    rows["fresh step"] = _cpu(lambda: _done(service.invoke(steps), "SUCCEEDED")) / n
    service = replayable(n)
    rows["replayed entry"] = _cpu(lambda: _done(service.invoke(steps), "PENDING")) / n
    for items in (100, 1000):
        service = FakeService({"items": items})
        rows[f"ctx.map, {items:,} items"] = _cpu(lambda s=service: _done(s.invoke(mapped), "SUCCEEDED")) / items
    peaks = []
    for size in (100, n):
        service = fresh(size)
        peaks.append(_peak(lambda s=service: _done(s.invoke(steps), "SUCCEEDED")))
    rows["memory per fresh step"] = (peaks[1] - peaks[0]) / (n - 100)
    peaks = []
    for size in (100, n):
        service = replayable(size)
        peaks.append(_peak(lambda s=service: _done(s.invoke(steps), "PENDING")))
    rows["memory per replayed entry"] = (peaks[1] - peaks[0]) / (n - 100)
    return rows


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    measure(count)  # warm-up
    print(json.dumps(measure(count)))
