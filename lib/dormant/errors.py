"""Errors raised by the actor layer, the runtime and the backends (the engine's are in workflow.errors)."""

from __future__ import annotations

from typing import Protocol

from dormant.workflow.errors import DormantError
from dormant.workflow.errors import WorkflowTimeoutError as WorkflowTimeoutError  # raised by the engine, named here


class NamedLimit(Protocol):
    """What an error tells of the limit a value is over (dormant.core.limits.ServiceLimit is one: that module imports
    this one, so the error knows the limit only by its face)."""

    @property
    def name(self) -> str: ...

    @property
    def maximum(self) -> int: ...

    @property
    def unit(self) -> str: ...

    def describe(self) -> str: ...


class UnknownActorError(DormantError):
    """No actor type with this name is registered."""


class UnknownActorOptionError(DormantError, TypeError):
    """`actor(...)` got a keyword it does not take (a TypeError, like any bad call): the message names the accepted
    ones."""


class UnknownQueueError(DormantError):
    """The actor declares no queue with this name."""


class UnknownActionError(DormantError):
    """The actor declares no action with this name."""


class UnknownEventError(DormantError):
    """The actor declares no event with this name."""


class UnknownCallbackError(DormantError):
    """The actor declares no callback with this name."""


class InvalidMessageError(DormantError):
    """A queue message body, response, event payload or action input failed validation."""

    def __init__(self, message: str, errors: list[dict[str, object]] | None = None) -> None:
        self.errors = errors or []
        super().__init__(message)


class InvalidArgumentsError(DormantError, TypeError):
    """An action's arguments do not fit its signature or its type hints (a TypeError, like a bad call)."""


class IdempotencyConflictError(DormantError):
    """A message id (Idempotency-Key) was reused for another queue or another body."""


class InvalidKeyError(DormantError):
    """An actor key is not a non-empty list of non-empty strings."""


class InvalidMessageIdError(DormantError, ValueError):
    """A caller-given message id (an Idempotency-Key) that cannot name a stored message (dormant.core.limits)."""


class InvalidSettingError(DormantError, ValueError):
    """A setting the services would refuse (a table or queue name DynamoDB or SQS cannot take: dormant.core.limits)."""


class ActorNotFoundError(DormantError):
    """The actor does not exist (never created, or deleted): a request through a `client.get` handle, or an
    operator's action or read, never creates it (HTTP 404 `actor_not_found`; the message never repeats the key)."""


class VersionConflict(DormantError):
    """A commit lost the race: the actor's version moved since it was read."""


class StorageError(DormantError):
    """The event store failed; the operation changed nothing or is safe to retry."""


class StorageRefusedError(StorageError):
    """The store refused a request as invalid (DynamoDB's ValidationException): retrying cannot help. Dormant's
    own checks (dormant.core.limits) refuse such values before anything is written; this is what is left."""


class ItemTooLargeError(StorageRefusedError):
    """A record is over the store's item size limit (dormant.core.limits); retrying cannot help."""

    limit: NamedLimit | None = None  # the limit it is over (dormant.core.limits), when Dormant's own check refused it


class StoredValueLostError(StorageError):
    """A value the actor stored in S3 is gone for good (`dormant doctor` found it; docs/operations.md)."""


class TransportError(DormantError):
    """The wake-up transport (SQS) could not be reached; nothing was sent."""


class SendFailedError(StorageError):
    """A send could not finish. `stored` says where the message is: False, nowhere (send it again);
    True, in its wake-up, which stores and processes it (sending it again with the same id is harmless)."""

    def __init__(self, message: str, *, message_id: str = "", stored: bool = False) -> None:
        super().__init__(message)
        self.message_id = message_id
        self.stored = stored


class BatchSendFailedError(SendFailedError):
    """A `send_many` could not finish: `stored_ids` will be processed (their wake-ups carry them), `unstored_ids`
    are nowhere (send them again: the same ids are harmless)."""

    def __init__(self, message: str, *, stored_ids: list[str], unstored_ids: list[str]) -> None:
        super().__init__(message, message_id=(unstored_ids or stored_ids or [""])[0], stored=not unstored_ids)
        self.stored_ids = stored_ids
        self.unstored_ids = unstored_ids


class WakeFailedError(DormantError):
    """A wake-up kept failing (e.g. lost every version race); it is retried by the transport."""


class ActorFinishedError(DormantError):
    """The actor's workflow has ended (completed or terminated): it takes no more messages."""


class InvalidCursorError(DormantError):
    """A listing cursor that no listing of this actor type (and status) handed out."""


class InvalidSearchAttributeError(DormantError, ValueError):
    """A step or action set a search attribute its actor does not declare, or a value that is not of the declared
    type or is over its limit (dormant.core.search); the message names the attribute and the rule, never the value."""


class InvalidSearchConditionError(DormantError, ValueError):
    """A search condition (`where`) that cannot be read against the actor type's declared search attributes
    (HTTP 400 `invalid_where`); the message says which condition, by position, and why, never echoing it."""


class NotResumableError(DormantError):
    """An operator's resume was refused: the message says why and what to do instead."""


class StillDivergedError(NotResumableError):
    """Resume of a diverged actor refused: the code deployed now still diverges from its history."""

    def __init__(self, message: str, divergence: dict[str, object] | None = None) -> None:
        self.divergence = divergence or {}
        super().__init__(message)


class NoTimerError(DormantError):
    """Firing an actor's next timer (`dormant fire-timer`, dev only) found none: the message says what it waits for."""


class ForbiddenError(DormantError):
    """The actor's authorization hook refused the caller this operation (HTTP 403 `forbidden`)."""


class ActorPausedError(DormantError):
    """The actor is paused by an operator: actions and resumes are refused until it is unpaused (sends are
    stored and wait)."""


class ActorExistsError(DormantError):
    """`client.create` (or a fork) was refused: an actor with this key exists already (HTTP 409 `actor_exists`)."""


class VersionNotRetainedError(DormantError):
    """A fork or reset named a version the store no longer keeps (or never had): the message gives the range kept."""


class WouldDivergeError(DormantError):
    """A fork or reset was refused: the kept history, replayed against the code deployed here, diverges."""

    def __init__(self, message: str, divergence: dict[str, object] | None = None) -> None:
        self.divergence = divergence or {}
        super().__init__(message)


class InvalidCallbackTokenError(DormantError):
    """A string that is not a callback token (tokens are `dcb_` and 43 URL-safe characters: `cb.token`)."""


class CallbackNotFoundError(DormantError):
    """No callback has this token (never had, or it ended over a day ago and was forgotten)."""


class CallbackExpiredError(DormantError):
    """The callback is over without a completion (timed out, cancelled, its actor gone or finished): nothing is
    stored."""


class CallbackCompletedError(DormantError):
    """The callback was completed (or failed) already, with another result: a second completion is refused."""


class CallbackSignatureError(DormantError):
    """A request to a callback that declares a signature check (`callback(..., verify=...)`) carries no valid
    signature of its body: nothing is stored."""
