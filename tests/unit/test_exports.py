"""The public API is what `dormant` exports (DESIGN.md section 2): pinned here, so adding or dropping a name is a
decision made in this file, not a side effect."""

from __future__ import annotations

import pytest

import dormant
import dormant.errors
from dormant import UnknownActorOptionError, actor

PUBLIC = {
    # the actor model and its registry
    "ActorDefinition", "Registry", "actor", "callback", "event", "queue", "setup", "Limit",
    # what a callback declares: an approval's result, a webhook's signature check
    "Approval", "HmacSignature",
    # contexts
    "AccessRequest", "ActionContext", "HookContext", "StepContext", "WorkflowContext",
    # the client and what it returns
    "ActorHandle", "ActorStatus", "CallbackStatus", "Client", "SendResult", "WorkflowState",
    # what workflow primitives return
    "Callback", "Caller", "Loop", "MapItem", "MapItemStatus", "MapResult", "QueueMessage", "RaceResult",
    "StepFailure", "StepResult", "TryFailure", "TryResult",
    # errors
    "ActorExistsError", "ActorNotFoundError", "CallbackCancelledError", "CallbackCompletedError", "CallbackError",
    "CallbackExpiredError",
    "CallbackFailedError", "CallbackHeartbeatTimeoutError", "CallbackNotFoundError", "CallbackSignatureError",
    "CallbackTimeoutError",
    "CallbackUrlError", "ForbiddenError", "HistoryDivergedError", "InvalidCallbackTokenError", "InvalidKeyError",
    "InvalidMessageError", "JoinError", "MapError", "NonRetryableError", "QueueTimeoutError", "RaceError",
    "StepExhaustedError", "StepOnlyError", "StepTimeoutError", "UnknownActionError", "UnknownActorError",
    "UnknownActorOptionError", "UnknownCallbackError", "UnknownEventError", "UnknownQueueError", "VersionConflict",
    "WorkflowTimeoutError",
}


def test_dormant_exports_exactly_the_public_api() -> None:
    assert set(dormant.__all__) == PUBLIC
    assert len(dormant.__all__) == len(PUBLIC)  # no name twice
    for name in dormant.__all__:
        assert getattr(dormant, name) is not None, name


def test_the_workflow_timeout_error_is_named_in_dormant_errors() -> None:
    assert dormant.errors.WorkflowTimeoutError is dormant.WorkflowTimeoutError
    assert issubclass(dormant.WorkflowTimeoutError, dormant.errors.DormantError)


def test_an_unknown_actor_option_is_an_error_naming_the_accepted_ones() -> None:
    with pytest.raises(UnknownActorOptionError) as raised:
        actor("typo", stat=None, queue={})
    message = str(raised.value)
    assert "'queue'" in message and "'stat'" in message
    for accepted in ("state", "queues", "events", "callbacks", "vars", "search", "workflow_timeout"):
        assert accepted in message
    assert isinstance(raised.value, TypeError)
    assert actor("fine", workflow_timeout=60).workflow_timeout == 60
