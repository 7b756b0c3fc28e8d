"""Which sends an actor takes, and what a send's wake-up can carry: the rules every send path applies (a send, a
batch of them: dormant.runtime.service, dormant.runtime.batches)."""

from __future__ import annotations

from typing import Literal

from dormant.core.limits import CARRIED_MESSAGE
from dormant.errors import ItemTooLargeError
from dormant.ports import FINISHED, MAX_CARRIED_BYTES, Creation, InboxMessage
from dormant.workflow.history import WorkflowState

# -- which workflow states take messages: the one place that says so ---------------------------------------
SendRule = Literal["run", "hold", "refuse"]
REFUSING_STATES: frozenset[WorkflowState] = frozenset(FINISHED)
"""An ended workflow (completed, terminated) consumes nothing more: a send is refused (409 actor_finished) and
nothing is stored."""
HOLDING_STATES: frozenset[WorkflowState] = frozenset({WorkflowState.FAILED, WorkflowState.DIVERGED,
                                                      WorkflowState.ROLLING_BACK, WorkflowState.PAUSED})
"""Stopped by an error, or paused by an operator: a send is stored and runs after an operator resumes (unpauses) the
actor (202 with the status)."""


def send_rule(state: WorkflowState) -> SendRule:
    """What a send to an actor in `state` does: run (normal), hold (stored, waits) or refuse."""
    if state in REFUSING_STATES:
        return "refuse"
    if state in HOLDING_STATES:
        return "hold"
    return "run"


def check_carried_size(message: InboxMessage | None, creation: Creation | None) -> None:
    """The wake-up carries the message (and the actor's input): it must fit one SQS message."""
    # (model_dump_json's text is these bytes decoded: measured without decoding and encoding them again)
    size = len(message.__pydantic_serializer__.to_json(message)) if message is not None else 0
    if creation is not None:
        size += len(creation.__pydantic_serializer__.to_json(creation))
    if size > MAX_CARRIED_BYTES:
        what = "the message" if message is not None else "the actor's input"
        error = ItemTooLargeError(f"{what} is {size:,} bytes as JSON (with the actor's input when it creates the "
                                  f"actor), over the limit ({CARRIED_MESSAGE.name}): {CARRIED_MESSAGE.describe()}. "
                                  "Store large payloads elsewhere (e.g. S3) and send a reference")
        error.limit = CARRIED_MESSAGE
        raise error
