"""Errors raised by the actor layer, the runtime and the backends (the engine's are in workflow.errors)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dormant.workflow.errors import DormantError

if TYPE_CHECKING:
    from dormant.limits import Limit


class UnknownActorError(DormantError):
    """No actor type with this name is registered."""


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
    """A caller-given message id (an Idempotency-Key) that cannot name a stored message (dormant.limits)."""


class InvalidSettingError(DormantError, ValueError):
    """A setting the services would refuse (a table or queue name DynamoDB or SQS cannot take: dormant.limits)."""


class ActorNotFoundError(DormantError):
    """The actor has not been created yet (no request went through a handle)."""


class VersionConflict(DormantError):
    """A commit lost the race: the actor's version moved since it was read."""


class StorageError(DormantError):
    """The event store failed; the operation changed nothing or is safe to retry."""


class StorageRefusedError(StorageError):
    """The store refused a request as invalid (DynamoDB's ValidationException): retrying cannot help. Dormant's
    own checks (dormant.limits) refuse such values before anything is written; this is what is left."""


class ItemTooLargeError(StorageRefusedError):
    """A record is over the store's item size limit (dormant.limits); retrying cannot help."""

    limit: Limit | None = None  # the limit it is over (dormant.limits), when Dormant's own check refused it


class TransportError(DormantError):
    """The wake-up transport (SQS) could not be reached; nothing was sent."""


class SendFailedError(StorageError):
    """A send could not finish. `stored` says where the message is: False, nowhere (send it again);
    True, in its wake-up, which stores and processes it (sending it again with the same id is harmless)."""

    def __init__(self, message: str, *, message_id: str = "", stored: bool = False) -> None:
        super().__init__(message)
        self.message_id = message_id
        self.stored = stored


class WakeFailedError(DormantError):
    """A wake-up kept failing (e.g. lost every version race); it is retried by the transport."""


class ActorFinishedError(DormantError):
    """The actor's workflow has ended (completed or terminated): it takes no more messages."""


class InvalidCursorError(DormantError):
    """A listing cursor that no listing of this actor type (and status) handed out."""


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


class InvalidCallbackTokenError(DormantError):
    """A string that is not a callback token (tokens are `dcb_` and 43 URL-safe characters: `cb.token`)."""


class CallbackNotFoundError(DormantError):
    """No callback has this token (never had, or it ended over a day ago and was forgotten)."""


class CallbackExpiredError(DormantError):
    """The callback is over without a completion (timed out, cancelled, its actor gone or finished): nothing is
    stored."""


class CallbackCompletedError(DormantError):
    """The callback was completed (or failed) already, with another result: a second completion is refused."""
