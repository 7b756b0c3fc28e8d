"""Dormant: durable actor workflows in Python that run serverless on AWS."""

from dormant.actor import ActorDefinition, Registry, actor, callback, event, queue, setup
from dormant.client import ActorHandle, Client
from dormant.core.flow import Limit
from dormant.core.signatures import HmacSignature
from dormant.errors import (
    ActorExistsError,
    ActorNotFoundError,
    CallbackCompletedError,
    CallbackExpiredError,
    CallbackNotFoundError,
    CallbackSignatureError,
    ForbiddenError,
    InvalidCallbackTokenError,
    InvalidKeyError,
    InvalidMessageError,
    UnknownActionError,
    UnknownActorError,
    UnknownActorOptionError,
    UnknownCallbackError,
    UnknownEventError,
    UnknownQueueError,
    VersionConflict,
    WorkflowTimeoutError,
)
from dormant.models import ActorStatus, Approval, CallbackStatus, SendResult
from dormant.runtime.access import AccessRequest
from dormant.runtime.contexts import ActionContext, HookContext, StepContext
from dormant.workflow import (
    Callback,
    CallbackCancelledError,
    CallbackError,
    CallbackFailedError,
    CallbackHeartbeatTimeoutError,
    CallbackTimeoutError,
    CallbackUrlError,
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
    StepFailure,
    StepOnlyError,
    StepResult,
    StepTimeoutError,
    TryFailure,
    TryResult,
    WorkflowContext,
    WorkflowState,
)

__all__ = [
    "AccessRequest", "ActionContext", "ActorDefinition", "ActorExistsError", "ActorHandle", "ActorNotFoundError",
    "ActorStatus", "Approval", "Callback", "CallbackCancelledError", "CallbackCompletedError", "CallbackError",
    "CallbackExpiredError", "CallbackFailedError", "CallbackHeartbeatTimeoutError", "CallbackNotFoundError",
    "CallbackSignatureError", "CallbackStatus", "CallbackTimeoutError", "CallbackUrlError", "Caller", "Client",
    "ForbiddenError", "HistoryDivergedError", "HmacSignature", "HookContext", "InvalidCallbackTokenError",
    "InvalidKeyError", "InvalidMessageError",
    "JoinError", "Limit", "Loop", "MapError", "MapItem", "MapItemStatus", "MapResult", "NonRetryableError",
    "QueueMessage", "QueueTimeoutError", "RaceError", "RaceResult", "Registry", "SendResult", "StepContext",
    "StepExhaustedError", "StepFailure", "StepOnlyError", "StepResult", "StepTimeoutError", "TryFailure",
    "TryResult", "UnknownActionError", "UnknownActorError", "UnknownActorOptionError", "UnknownCallbackError",
    "UnknownEventError", "UnknownQueueError", "VersionConflict", "WorkflowContext", "WorkflowState",
    "WorkflowTimeoutError", "actor", "callback", "event", "queue", "setup",
]
