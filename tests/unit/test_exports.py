"""The public names of `dormant` (DESIGN.md section 2) are pinned: a name added or dropped is a decision."""

from __future__ import annotations

import pytest

import dormant
from dormant import UnknownActorOptionError, actor

EXPORTS = {
    "AccessRequest", "ActionContext", "ActorDefinition", "ActorExistsError", "ActorHandle", "ActorNotFoundError",
    "ActorStatus", "Callback", "CallbackCancelledError", "CallbackCompletedError", "CallbackError",
    "CallbackExpiredError", "CallbackFailedError", "CallbackHeartbeatTimeoutError", "CallbackNotFoundError",
    "CallbackStatus", "CallbackTimeoutError", "CallbackUrlError", "Caller", "Client", "ForbiddenError",
    "HistoryDivergedError", "HookContext", "InvalidCallbackTokenError", "InvalidKeyError", "InvalidMessageError",
    "JoinError", "Limit", "Loop", "MapError", "MapItem", "MapItemStatus", "MapResult", "NonRetryableError",
    "QueueMessage", "QueueTimeoutError", "RaceError", "RaceResult", "Registry", "SendResult", "StepContext",
    "StepExhaustedError", "StepOnlyError", "StepTimeoutError", "UnknownActionError", "UnknownActorError",
    "UnknownActorOptionError", "UnknownCallbackError", "UnknownEventError", "UnknownQueueError", "VersionConflict",
    "WorkflowContext", "WorkflowState", "actor", "callback", "event", "queue", "setup",
}


def test_the_exports_are_pinned_and_each_resolves() -> None:
    assert set(dormant.__all__) == EXPORTS
    assert all(getattr(dormant, name) is not None for name in EXPORTS)


def test_an_unknown_actor_option_is_an_error_naming_the_accepted_ones() -> None:
    with pytest.raises(UnknownActorOptionError) as raised:
        actor("typo", stat=None, queue={})
    message = str(raised.value)
    assert "'queue'" in message and "'stat'" in message
    for accepted in ("state", "queues", "events", "callbacks", "vars", "search", "workflow_timeout"):
        assert accepted in message
    assert isinstance(raised.value, TypeError)
    assert actor("fine", workflow_timeout=60).options == {"workflow_timeout": 60}  # (part of issue 33, elsewhere)
