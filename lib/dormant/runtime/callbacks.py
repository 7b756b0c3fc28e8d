"""The outside system's side of a callback (`ctx.callback`): complete, fail, heartbeat, read, by the token alone.

Behind `POST /callbacks/{token}`, `GET /callbacks/{token}`, `Client.complete_callback(...)` and
`dormant callback ...`. The token is the authorization: nothing else is asked. It finds the callback through the
lookup record the store keeps under the token's SHA-256 (`EventStore.read_callback`: one read, no scan); the
token itself is never stored outside the actor's history, never logged and never echoed.

- A completion (or failure) is a message of kind "callback" with one id per callback, delivered like a send
  (`ActorService.deliver`: its wake-up first, carrying it; then the inbox write), so an accepted completion is
  durable and a retried one is the same message; another result after it is refused (`CallbackCompletedError`).
- Before anything is written it must be open: the record says so, its deadline and heartbeat deadline are ahead,
  its actor still exists (the same incarnation) and its workflow still takes messages. The result is validated
  against the callback's declared model (`callback(Model)`).
- A heartbeat moves the record's heartbeat deadline (one conditional write): the actor is not woken; it reads
  the record only once its recorded heartbeat deadline is reached (dormant.workflow.callbacks).
- A request that came over HTTP carries its headers and exact body (`SignedBody`): a callback that declares
  `verify=` takes it only if the verifier accepts them (CallbackSignatureError, 401), checked after the record is
  found (it names the actor type, hence the declaration) and before the body is validated or anything written.
  In-process calls (`Client.complete_callback` on TestEnv or a service) are the application's own code: unchecked.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dormant.actor import CallbackSpec, Registry
from dormant.core.callbacks import CallbackRecord
from dormant.errors import (
    CallbackCompletedError,
    CallbackExpiredError,
    CallbackNotFoundError,
    CallbackSignatureError,
    IdempotencyConflictError,
    InvalidCallbackTokenError,
    InvalidMessageError,
    UnknownActorError,
    UnknownCallbackError,
)
from dormant.models import CallbackStatus, CallbackStatusName, WaitingCallback
from dormant.ports import FINISHED, ActorRef, Clock, EventStore, InboxMessage
from dormant.workflow.callbacks import completion_id, token_hash
from dormant.workflow.execution import to_json
from dormant.workflow.history import EntryKind, EntryStatus, HistoryEntry
from dormant.workflow.values import check_json

TOKEN_PREFIX = "dcb_"
TOKEN_PATTERN = re.compile(r"dcb_[A-Za-z0-9_-]{43}")
"""A token: `dcb_` (greppable, e.g. by secret scanners) and 256 random bits in URL-safe base64."""
REDACTED = "<redacted>"
MAX_ERROR_TYPE = 128
MAX_ERROR_MESSAGE = 4096


@dataclass(frozen=True, slots=True)
class SignedBody:
    """What a signature is checked against: the request's headers and its body exactly as sent."""

    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class CallbackPage:
    """What an approval page shows: the callback's name and declared description, where it stands, whether it
    is an approval (`callback(Approval)`)."""

    status: CallbackStatus
    description: str | None
    approval: bool


def new_token() -> str:
    """A new callback token: 256 bits from `secrets` (the OS's CSPRNG)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def check_token(token: object) -> str:
    """The token's hash, if `token` has a token's form; else InvalidCallbackTokenError (never echoing it)."""
    if not isinstance(token, str) or TOKEN_PATTERN.fullmatch(token) is None:
        raise InvalidCallbackTokenError("that is not a callback token: a token is `dcb_` followed by 43 URL-safe "
                                        "characters, as the workflow's `cb.token` hands it out")
    return token_hash(token)


def callback_url(public_url: str | None, token: str) -> str | None:
    """Where the outside system posts: `<public URL>/callbacks/<token>` (None without a public URL)."""
    return f"{public_url.rstrip('/')}/callbacks/{token}" if public_url else None


def without_tokens(entries: Sequence[HistoryEntry]) -> list[HistoryEntry]:
    """The entries with every callback token replaced by "<redacted>" (what the HTTP API shows outside dev mode:
    a history reader is an operator, not the outside system)."""
    return [e.model_copy(update={"callback": e.callback.model_copy(update={"token": REDACTED})})
            if e.callback is not None else e for e in entries]


def error_parts(error: str | BaseException, message: str | None = None) -> tuple[str, str]:
    """(type, message) of a failure given as an exception or as a type name and a message."""
    if isinstance(error, BaseException):
        return type(error).__name__, str(error) if message is None else message
    return error, message or ""


class CallbackHost(Protocol):
    """What callback requests need (an ActorService has it)."""

    registry: Registry
    store: EventStore
    clock: Clock

    async def deliver(self, ref: ActorRef, message: InboxMessage, *, compare: bool = False) -> None: ...


def _expired(record: CallbackRecord, now: float) -> str | None:
    """Why an open record takes nothing more (its deadline or heartbeat deadline passed), or None."""
    if record.deadline is not None and now >= record.deadline:
        return "its timeout passed"
    if record.heartbeat_deadline is not None and now >= record.heartbeat_deadline:
        return "its heartbeat timeout passed"
    return None


def _shown(record: CallbackRecord, status: CallbackStatusName | None = None) -> CallbackStatus:
    return CallbackStatus(status=status or record.state, callback=record.name, deadline=record.deadline,
                          heartbeat_deadline=record.heartbeat_deadline)


class CallbackOperations:
    """Callback requests over one ActorService (no caller: the token is the authorization)."""

    def __init__(self, host: CallbackHost) -> None:
        self.host = host

    async def status(self, token: str) -> CallbackStatus:
        """Where the callback stands (`expired`: past a deadline the workflow has not recorded yet)."""
        record = await self._find(check_token(token))
        if record.state == "open" and _expired(record, self.host.clock.now()):
            return _shown(record, "expired")
        return _shown(record)

    async def page(self, token: str) -> CallbackPage:
        """What its approval page shows (one read)."""
        record = await self._find(check_token(token))
        spec = self._spec(record)
        status = _shown(record, "expired") if record.state == "open" and _expired(record, self.host.clock.now()) \
            else _shown(record)
        return CallbackPage(status=status, description=spec.description, approval=spec.is_approval)

    async def approve(self, token: str, approved: bool) -> CallbackStatus:
        """Complete an approval callback (`callback(Approval)`) with the decision taken on its page."""
        hashed = check_token(token)
        record = await self._find(hashed)
        if not self._spec(record).is_approval:
            raise CallbackNotFoundError("no approval callback has this token: this callback takes a result, not an "
                                        "approval (declare it callback(Approval) to use its approval link)")
        return await self.complete(token, {"approved": approved})

    async def complete(self, token: str, result: Any = None, *, signed: SignedBody | None = None
                       ) -> CallbackStatus:
        """Deliver the result (validated against the callback's declared model)."""
        hashed = check_token(token)
        record = await self._find(hashed)
        spec = self._spec(record)
        self._verify(spec, signed)
        given = to_json(result, "the result")  # what HTTP sends: JSON the store can hold (InvalidJsonError)
        value = spec.validate_result(record.name, given)  # InvalidMessageError names the field, never the value
        return await self._deliver(record, {"token_hash": hashed, "outcome": "completed", "result": value})

    async def fail(self, token: str, error_type: str, message: str = "", *, signed: SignedBody | None = None
                   ) -> CallbackStatus:
        """Deliver a failure: `cb.result()` raises CallbackFailedError(error_type, message)."""
        hashed = check_token(token)
        if not isinstance(error_type, str) or not 0 < len(error_type) <= MAX_ERROR_TYPE \
                or not error_type.isprintable():
            raise InvalidMessageError(f"error.type must be 1 to {MAX_ERROR_TYPE} printable characters")
        if not isinstance(message, str) or len(message) > MAX_ERROR_MESSAGE:
            raise InvalidMessageError(f"error.message must be a string of at most {MAX_ERROR_MESSAGE} characters")
        check_json([error_type, message], "the error")  # lone surrogates: InvalidJsonError
        record = await self._find(hashed)
        self._verify(self._spec(record), signed)
        return await self._deliver(record, {"token_hash": hashed, "outcome": "failed",
                                            "error": {"type": error_type, "message": message}})

    async def heartbeat(self, token: str, *, signed: SignedBody | None = None) -> CallbackStatus:
        """Move the heartbeat deadline to now + heartbeat_timeout (one read, one conditional write)."""
        hashed = check_token(token)
        record = await self._find(hashed)
        if signed is not None:  # (a callback the deployed code no longer declares takes heartbeats, as before)
            definition = self.host.registry.actors.get(record.actor)
            declared = definition.callbacks.get(record.name) if definition is not None else None
            if declared is not None:
                self._verify(declared, signed)
        now = self.host.clock.now()
        self._check_open(record, now)
        if record.heartbeat_timeout is None:  # nothing to move: the heartbeat only says it is still open
            return _shown(record, "open")
        moved = now + record.heartbeat_timeout
        if not await self.host.store.heartbeat_callback(hashed, moved, now):
            self._check_open(await self._find(hashed), now)  # raises: why it did not move
            raise CallbackExpiredError("the callback takes no heartbeats any more")
        shown = _shown(record, "open")
        shown.heartbeat_deadline = max(moved, record.heartbeat_deadline or moved)
        return shown

    # -- helpers ------------------------------------------------------------------------------------------
    async def _find(self, hashed: str) -> CallbackRecord:
        record = await self.host.store.read_callback(hashed)
        if record is None or (record.expires_at is not None and record.expires_at <= self.host.clock.now()):
            raise CallbackNotFoundError("no callback has this token (a callback is forgotten a day after it ended)")
        return record

    def _spec(self, record: CallbackRecord) -> CallbackSpec:
        try:
            return self.host.registry.get(record.actor).callback_spec(record.name)
        except (UnknownActorError, UnknownCallbackError):
            raise CallbackExpiredError("the code deployed no longer declares this callback (or its actor type)"
                                       ) from None

    @staticmethod
    def _verify(spec: CallbackSpec, signed: SignedBody | None) -> None:
        if spec.verify is None or signed is None:
            return
        if not spec.verify(signed.headers, signed.body):
            raise CallbackSignatureError("the request carries no valid signature of its body: this callback takes "
                                         "only requests its sender signed")

    @staticmethod
    def _check_open(record: CallbackRecord, now: float) -> None:
        if record.state in ("completed", "failed"):
            raise CallbackCompletedError(f"the callback is {record.state} already: it takes nothing more")
        if record.state != "open":
            raise CallbackExpiredError("the callback " + ("timed out" if record.state == "timed_out" else
                                                          "was cancelled (its scope in the workflow ended)"))
        why = _expired(record, now)
        if why is not None:
            raise CallbackExpiredError(f"the callback is over: {why}")

    async def _deliver(self, record: CallbackRecord, body: dict[str, Any]) -> CallbackStatus:
        store, now = self.host.store, self.host.clock.now()
        ref = record.ref
        message = InboxMessage(id=completion_id(record.callback_id, record.completion_id), queue=record.name,
                               kind="callback", body=body, created_at=now)
        # Taken already: the same completion again is answered as such (a retried POST).
        if record.state in ("completed", "failed") and \
                await store.message_fingerprint(ref, message.id) == message.fingerprint():
            return _shown(record)
        self._check_open(record, now)
        summary = await store.read_summary(ref)  # one read: the actor, its incarnation, whether it takes messages
        if summary is None or summary.created_at != record.actor_created_at:
            raise CallbackExpiredError("the actor that made the callback no longer exists")
        if summary.status in FINISHED:
            raise CallbackExpiredError(f"the actor's workflow is {summary.status.value}: it takes nothing more")
        store.check_message(ref, message)  # nothing written yet: sizes (ItemTooLargeError, 413)
        message = await store.prepare_message(ref, message)
        try:
            await self.host.deliver(ref, message, compare=True)
        except IdempotencyConflictError:
            raise CallbackCompletedError("the callback was completed already with another result: a second "
                                         "completion is refused") from None
        return _shown(record, "accepted")


async def waiting_callbacks(store: EventStore, history: Sequence[HistoryEntry]) -> list[WaitingCallback]:
    """The open callbacks of a history (for status), with heartbeat deadlines as heartbeats moved them."""
    found: list[WaitingCallback] = []
    for entry in sorted(history, key=lambda e: e.seq):
        if entry.kind is not EntryKind.CALLBACK or entry.status is not EntryStatus.PENDING or entry.callback is None:
            continue
        beat = entry.callback.heartbeat_deadline
        if beat is not None:  # one read per open callback with heartbeats (few): the record is the authority
            record = await store.read_callback(token_hash(entry.callback.token))
            if record is not None and record.heartbeat_deadline is not None:
                beat = max(beat, record.heartbeat_deadline)
        found.append(WaitingCallback(name=entry.name, location=entry.location, deadline=entry.deadline,
                                     heartbeat_deadline=beat))
    return found
