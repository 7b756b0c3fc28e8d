"""How dormant's exceptions travel over HTTP: one table, read by the API (exception -> status and code)
and by the HTTP client (code -> exception). No web framework here: the client imports it too."""

from __future__ import annotations

from dormant.errors import (
    ActorExistsError,
    ActorFinishedError,
    ActorNotFoundError,
    ActorPausedError,
    CallbackCompletedError,
    CallbackExpiredError,
    CallbackNotFoundError,
    ForbiddenError,
    IdempotencyConflictError,
    InvalidArgumentsError,
    InvalidCallbackTokenError,
    InvalidCursorError,
    InvalidKeyError,
    InvalidMessageError,
    InvalidMessageIdError,
    InvalidSearchConditionError,
    ItemTooLargeError,
    NoTimerError,
    NotResumableError,
    SendFailedError,
    StillDivergedError,
    StorageError,
    StorageRefusedError,
    TransportError,
    UnknownActionError,
    UnknownActorError,
    UnknownCallbackError,
    UnknownEventError,
    UnknownQueueError,
    VersionConflict,
    VersionNotRetainedError,
    WakeFailedError,
    WouldDivergeError,
)
from dormant.workflow.errors import DormantError, InvalidJsonError

# Checked in order (subclasses first); where two exceptions share a code, the client raises the first.
ERROR_CODES: list[tuple[type[DormantError], int, str]] = [
    (UnknownActorError, 404, "unknown_actor"),
    (UnknownQueueError, 404, "unknown_queue"),
    (UnknownActionError, 404, "unknown_action"),
    (UnknownEventError, 404, "unknown_event"),
    (UnknownCallbackError, 404, "unknown_callback"),
    (InvalidCallbackTokenError, 400, "invalid_callback_token"),
    (CallbackNotFoundError, 404, "callback_not_found"),
    (CallbackExpiredError, 410, "callback_expired"),
    (CallbackCompletedError, 409, "callback_completed"),
    (ActorNotFoundError, 404, "actor_not_found"),
    (InvalidKeyError, 400, "invalid_key"),
    (ForbiddenError, 403, "forbidden"),
    (InvalidJsonError, 400, "invalid_json"),
    (InvalidCursorError, 400, "invalid_cursor"),
    (InvalidSearchConditionError, 400, "invalid_where"),
    (ActorFinishedError, 409, "actor_finished"),
    (ActorPausedError, 409, "actor_paused"),
    (ActorExistsError, 409, "actor_exists"),
    (VersionNotRetainedError, 409, "version_not_retained"),
    (WouldDivergeError, 409, "would_diverge"),
    (StillDivergedError, 409, "still_diverged"),
    (NotResumableError, 409, "not_resumable"),
    (NoTimerError, 409, "no_timer"),
    (InvalidMessageError, 422, "invalid_body"),
    (InvalidArgumentsError, 422, "invalid_arguments"),
    (IdempotencyConflictError, 409, "idempotency_conflict"),
    (ItemTooLargeError, 413, "payload_too_large"),
    (StorageRefusedError, 422, "refused_by_store"),
    (InvalidMessageIdError, 400, "invalid_idempotency_key"),
    (SendFailedError, 503, "send_failed"),
    (StorageError, 503, "storage_unavailable"),
    (TransportError, 503, "queue_unavailable"),
    (WakeFailedError, 503, "busy"),
    (VersionConflict, 503, "busy"),
]

EXCEPTION_BY_CODE: dict[str, type[DormantError]] = {}
for _kind, _status, _code in ERROR_CODES:
    EXCEPTION_BY_CODE.setdefault(_code, _kind)
