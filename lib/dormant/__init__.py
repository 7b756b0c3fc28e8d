"""Dormant: durable actor workflows in Python that run serverless on AWS."""

from dormant.actor import ActorDefinition, Registry, actor, event, queue, setup
from dormant.client import ActorHandle, Client
from dormant.errors import (
    ActorNotFoundError,
    ForbiddenError,
    InvalidKeyError,
    InvalidMessageError,
    UnknownActionError,
    UnknownActorError,
    UnknownEventError,
    UnknownQueueError,
    VersionConflict,
)
from dormant.flow import Limit
from dormant.models import ActorStatus, SendResult
from dormant.runtime.access import AccessRequest
from dormant.runtime.contexts import ActionContext, HookContext, StepContext
from dormant.workflow import (
    Caller,
    HistoryDivergedError,
    JoinError,
    Loop,
    MapError,
    MapItem,
    MapItemStatus,
    MapResult,
    NonRetryableError,
    QueueMessage,
    QueueTimeoutError,
    RaceError,
    RaceResult,
    StepExhaustedError,
    StepOnlyError,
    StepTimeoutError,
    WorkflowContext,
    WorkflowState,
)

__all__ = [
    "AccessRequest", "ActionContext", "ActorDefinition", "ActorHandle", "ActorNotFoundError", "ActorStatus",
    "Caller", "Client", "ForbiddenError", "HistoryDivergedError", "HookContext", "InvalidKeyError",
    "InvalidMessageError", "JoinError", "Limit", "Loop", "MapError", "MapItem", "MapItemStatus", "MapResult",
    "NonRetryableError", "QueueMessage", "QueueTimeoutError",
    "RaceError", "RaceResult", "Registry", "SendResult", "StepContext", "StepExhaustedError", "StepOnlyError",
    "StepTimeoutError", "UnknownActionError", "UnknownActorError", "UnknownEventError", "UnknownQueueError",
    "VersionConflict", "WorkflowContext", "WorkflowState", "actor", "event", "queue", "setup",
]
