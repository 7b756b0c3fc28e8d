"""What every operator action shares (dormant.runtime.operations, pausing, rewind): the host it runs over, the
result it reports, the load that refuses a missing actor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from dormant.errors import ActorNotFoundError
from dormant.models import OperationResult
from dormant.ports import ActorRef, ActorSnapshot, Clock, EventStore, Transport
from dormant.workflow.history import WorkflowState

if TYPE_CHECKING:
    from dormant.actor import Registry

MAX_RACES = 20  # lost version races before an action gives up (as the service's)


class OperatorHost(Protocol):
    """What the operator actions need: the ports and the registry (an ActorService has them)."""

    registry: Registry
    store: EventStore
    transport: Transport
    clock: Clock


def result(ref: ActorRef, operation: str, outcome: str, status: WorkflowState | None,
           message: str) -> OperationResult:
    return OperationResult.model_validate({"actor": ref.name, "key": list(ref.key), "operation": operation,
                                           "outcome": outcome, "status": status, "message": message})


async def load_existing(host: OperatorHost, ref: ActorRef) -> ActorSnapshot:
    snapshot = await host.store.load(ref)
    if snapshot is None:
        raise ActorNotFoundError("the actor does not exist")  # (errors never repeat the key a client sent)
    return snapshot
