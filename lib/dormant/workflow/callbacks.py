"""`ctx.callback`: a result an outside system delivers, authorized by a token alone (`POST /callbacks/{token}`).

`cb = await ctx.callback(name, timeout=..., heartbeat_timeout=...)` records a callback entry holding a new token
(the runtime makes it: `WorkflowHost.new_callback_token`) and commits it before it returns, so a step after it may
hand `cb.token` / `cb.url` to the outside system knowing the callback exists durably; a replay hands out the same
token. The commit also opens the callback's lookup record (by the token's hash: `CallbackChange`), which is how the
HTTP API finds the actor. `await cb.result()` waits like a queue wait: the completion arrives as a message of kind
"callback" in the actor's inbox (its wake-up sent first), is taken in the commit that records the result, and
replays from the record. The timeout, and a heartbeat deadline each heartbeat moves (heartbeats update the lookup
record only, so they wake nobody), raise ordinary exceptions, recorded like results.

A callback whose scope ends while it is open (its loop iteration, a race branch that lost, the workflow) is
cancelled at the end of that wake-up; completions of callbacks that are no longer open are dropped then.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import re
from datetime import timedelta
from typing import Any

from dormant.workflow.entries import Entry
from dormant.workflow.errors import (
    CallbackCancelledError,
    CallbackError,
    CallbackFailedError,
    CallbackHeartbeatTimeoutError,
    CallbackTimeoutError,
    CallbackUrlError,
    WorkflowDefinitionError,
)
from dormant.workflow.execution import Execution
from dormant.workflow.frame import Frame
from dormant.workflow.history import (
    ITERATION_MARK,
    SEPARATOR,
    BranchStatus,
    CallbackChange,
    CallbackInfo,
    CallbackOutcome,
    CallbackState,
    EntryKind,
    EntryStatus,
    ErrorInfo,
    WorkflowRecord,
    WorkflowState,
    validate_name,
)
from dormant.workflow.signals import RollbackStop, Suspend, WakeAborted
from dormant.workflow.waits import Outcome, wait_in_process

RESERVED_ID_PREFIX = "dormant:"
"""Message ids that start with this are Dormant's own: no caller's message id (an Idempotency-Key) can
(dormant.core.limits.check_message_id refuses them), so no send can take the id of a callback's completion."""
MESSAGE_PREFIX = RESERVED_ID_PREFIX + "callback:"  # a completion's id: this and the callback id (one per callback)
LEGACY_MESSAGE_PREFIX = "callback-"  # the same, for callbacks opened before the reserved namespace
_LEGACY_MESSAGE_ID = re.compile(LEGACY_MESSAGE_PREFIX + "[0-9a-f]{32}")
WEBHOOK_SUFFIX = "/webhook"  # `cb.webhook_url`: POST the provider's own JSON there, the whole body is the result
APPROVAL_SUFFIX = "/approve"  # `cb.approval_url`: GET shows a confirmation page, its form POSTs the decision
_STATES: dict[CallbackOutcome, CallbackState] = {"completed": "completed", "failed": "failed", "timed_out": "timed_out",
                                       "heartbeat_timed_out": "timed_out", "cancelled": "cancelled"}


def token_hash(token: str) -> str:
    """The SHA-256 of a token (hex): what the store keys a callback's lookup record by, never the token."""
    return hashlib.sha256(token.encode()).hexdigest()


def callback_id(hashed: str) -> str:
    """A callback's id: the first 128 bits of its token's hash."""
    return hashed[:32]


def message_id(callback: str) -> str:
    """The id of the completion message of a callback opened now: one per callback, so a retried completion is
    the same one; recorded with it (`CallbackInfo.completion_id`, the lookup record's `completion_id`)."""
    return MESSAGE_PREFIX + callback


def completion_id(callback: str, recorded: str | None) -> str:
    """The id of a callback's completion message: the one recorded when it was opened, or for a callback opened
    before ids were recorded (None), the form it had then, `callback-<id>`: whoever opened a callback and whoever
    completes it agree on its id whichever code runs each."""
    return recorded if recorded is not None else LEGACY_MESSAGE_PREFIX + callback


def is_reserved_message_id(message_id: str) -> bool:
    """Whether `message_id` is in the namespace of completions (`dormant:...`, or `callback-` and 32 lowercase hex
    digits, the id of a completion of a callback opened before `dormant:`): a caller's message id may not be."""
    return message_id.startswith(RESERVED_ID_PREFIX) or _LEGACY_MESSAGE_ID.fullmatch(message_id) is not None


def _seconds(value: float | timedelta | None, what: str, name: str) -> float | None:
    if value is None:
        return None
    result = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not result > 0:
        raise ValueError(f'callback "{name}": {what} must be > 0 seconds, got {result}')
    return result


class Callback:
    """A callback: hand `token` (or `url`) to the outside system in a step, then `await result()`."""

    def __init__(self, frame: Frame, entry: Entry) -> None:
        assert entry.callback is not None
        self._frame = frame
        self._entry = entry
        self.name = entry.name
        self.location = entry.location
        self.token = entry.callback.token
        self.id = entry.callback.id
        self.deadline = entry.deadline
        self.heartbeat_timeout = entry.callback.heartbeat_timeout

    def __repr__(self) -> str:  # never the token: reprs end up in logs
        return f"Callback({self.name!r} at {self.location!r})"

    @property
    def url(self) -> str:
        """`POST` here to complete it: the configured public URL (DORMANT_PUBLIC_URL) + `/callbacks/{token}`."""
        url = self._frame.execution.host.callback_url(self.token)
        if url is None:
            raise CallbackUrlError("cb.url needs the API's public URL: set DORMANT_PUBLIC_URL (or TestEnv's "
                                   "public_url=; `dormant dev` sets its own URL); cb.token is always available")
        return url

    @property
    def webhook_url(self) -> str:
        """`cb.url` + `/webhook`: the URL to give a provider that posts its own JSON: the whole body is the result
        (validated against the declared model); no `{"result": ...}` envelope, no failure or heartbeat form."""
        return self.url + WEBHOOK_SUFFIX

    @property
    def approval_url(self) -> str:
        """`cb.url` + `/approve`, for a callback declared `callback(Approval)`: a link for an email. Opening it
        shows a confirmation page (a GET never completes anything: mail scanners prefetch links); its Approve or
        Reject button posts the decision, and `result()` returns `Approval(approved=...)`."""
        return self.url + APPROVAL_SUFFIX

    async def result(self) -> Any:
        """Wait for the outside system's result (validated by the declared model, decoded into it).

        Raises CallbackFailedError (failed by the outside system), CallbackTimeoutError (its timeout passed),
        CallbackHeartbeatTimeoutError (no heartbeat in time) or CallbackCancelledError; all recorded."""
        frame, entry = self._frame, self._entry
        ex = frame.execution
        info = entry.callback
        assert info is not None
        frame.check_cancelled()
        if entry.status is EntryStatus.PENDING and ex.rolling_back:
            raise RollbackStop()
        while entry.status is EntryStatus.PENDING:
            message = ex.callback_messages.get(completion_id(info.id, info.completion_id))
            if message is not None and _is_for(message.body, info.token):
                ex.consume(message.id)
                body = message.body
                if body.get("outcome") == "failed":
                    error = body.get("error") or {}
                    _close(ex, entry, "failed", error=ErrorInfo(type=str(error.get("type", "Error")),
                                                                message=str(error.get("message", ""))))
                else:
                    _close(ex, entry, "completed", output=body.get("result"))
                break
            now = ex.now()
            if entry.deadline is not None and now >= entry.deadline:
                _close(ex, entry, "timed_out", error=ErrorInfo(
                    type="CallbackTimeoutError", message="no completion within the timeout"))
                break
            if info.heartbeat_deadline is not None and now >= info.heartbeat_deadline:
                fresh = await _heartbeat_deadline(ex, info)
                if fresh is not None and fresh > info.heartbeat_deadline:  # heartbeats moved it: record that
                    info.heartbeat_deadline = fresh
                    ex.touch(entry)
                    continue
                _close(ex, entry, "heartbeat_timed_out", error=ErrorInfo(
                    type="CallbackHeartbeatTimeoutError", message="no heartbeat within the heartbeat timeout"))
                break
            due = min((d for d in (entry.deadline, info.heartbeat_deadline) if d is not None), default=None)
            if await wait_in_process(ex, due, messages=True) is Outcome.SUSPEND:
                raise Suspend(deadline=due, reason="callback")
            frame.check_cancelled()  # a race decided while this branch waited: it lost
        return self._recorded()

    def _recorded(self) -> Any:
        entry, ex = self._entry, self._frame.execution
        info = entry.callback
        assert info is not None
        if entry.status is EntryStatus.COMPLETED:
            value = entry.output if entry.output is None or isinstance(entry.output, (str, int, float, bool)) \
                else copy.deepcopy(entry.output)
            return ex.host.decode_callback_result(self.name, value)
        raise recorded_error(entry.name, info.outcome, entry.error)


async def _heartbeat_deadline(ex: Execution, info: CallbackInfo) -> float | None:
    """The heartbeat deadline heartbeats moved (the lookup record), read once the recorded one has passed."""
    if ex.waits is None:  # offline replay: the record is all there is
        return None
    try:
        return await ex.waits.heartbeat_deadline(token_hash(info.token))
    except Exception as error:  # a storage error under the read: the wake-up is void, as for a commit
        raise WakeAborted(error) from error


def recorded_error(name: str, outcome: CallbackOutcome | None, error: ErrorInfo | None) -> CallbackError:
    """The exception a closed callback's `result()` raises, from what its entry recorded."""
    if outcome == "failed":
        return CallbackFailedError(name, error.type if error else "Error", error.message if error else "")
    if outcome == "timed_out":
        return CallbackTimeoutError(name, f'callback "{name}" timed out: no completion within its timeout')
    if outcome == "heartbeat_timed_out":
        return CallbackHeartbeatTimeoutError(name, f'callback "{name}" timed out: no heartbeat within its '
                                                   "heartbeat timeout")
    return CallbackCancelledError(name, f'callback "{name}" was cancelled: its scope ended before its result '
                                        "was awaited")


def _is_for(body: Any, token: str) -> bool:
    """Whether a completion carries this callback's token hash (compared in constant time)."""
    given = body.get("token_hash") if isinstance(body, dict) else None
    return isinstance(given, str) and hmac.compare_digest(given.encode(), token_hash(token).encode())


def _close(ex: Execution, entry: Entry, outcome: CallbackOutcome, *, output: Any = None,
           error: ErrorInfo | None = None) -> None:
    info = entry.callback
    assert info is not None
    info.outcome = outcome
    entry.status = (EntryStatus.COMPLETED if outcome == "completed" else
                    EntryStatus.CANCELLED if outcome == "cancelled" else EntryStatus.FAILED)
    entry.output = output
    entry.error = error
    entry.ended_at = ex.now()
    entry.put("timed_out", outcome in ("timed_out", "heartbeat_timed_out"))
    ex.touch(entry)
    ex.callback_changed(change_of(entry, _STATES[outcome], ex.now()))


def change_of(entry: Entry, state: CallbackState, at: float) -> CallbackChange:
    """The lookup record's change for a callback entry (`state`: open, or how it closed)."""
    info = entry.callback
    assert info is not None
    hashed = token_hash(info.token)
    return CallbackChange(token_hash=hashed, callback_id=info.id, completion_id=info.completion_id,
                          name=entry.name, location=entry.location,
                          state=state, deadline=entry.deadline, heartbeat_timeout=info.heartbeat_timeout,
                          heartbeat_deadline=info.heartbeat_deadline, at=at)


async def run_callback(frame: Frame, name: str, *, timeout: float | timedelta | None,
                       heartbeat_timeout: float | timedelta | None) -> Callback:
    validate_name(name, "callback")
    ex, scope = frame.execution, frame.scope
    frame.check_cancelled()
    declared = ex.host.callback_names()
    if name not in declared:
        raise WorkflowDefinitionError(
            f'callback "{name}" is not declared: declare it on the actor, actor(..., callbacks={{"{name}": '
            f"callback(ResultModel)}}); declared: {sorted(declared)}")
    limit = _seconds(timeout, "timeout", name)
    beat = _seconds(heartbeat_timeout, "heartbeat_timeout", name)
    entry = scope.claim(EntryKind.CALLBACK, name)
    if entry is not None:
        ex.replayed += 1
        if entry.callback is None:
            raise WorkflowDefinitionError(f'callback "{name}": its history entry has no callback record')
        return Callback(frame, entry)
    if ex.rolling_back:
        raise RollbackStop()
    location = scope.child(name)
    token = ex.host.new_callback_token(location)
    now = ex.now()
    identity = callback_id(token_hash(token))
    info = CallbackInfo(token=token, id=identity, completion_id=message_id(identity), heartbeat_timeout=beat,
                        heartbeat_deadline=now + beat if beat is not None else None)
    entry = ex.new_entry(EntryKind.CALLBACK, location, name, deadline=now + limit if limit is not None else None,
                         callback=info)
    ex.touch(entry)
    ex.callback_changed(change_of(entry, "open", now))
    # Stored before anything can hand the token out: a step that sends it runs after this commit, and a crash
    # before it leaves no token behind that the next run would not make again.
    await ex.commit_now()
    return Callback(frame, entry)


def close_ended(ex: Execution, record: WorkflowRecord) -> None:
    """Before a run's final commit: cancel the open callbacks whose scope has ended (all of them once the workflow
    completed or was terminated) and drop completions of callbacks that are no longer open."""
    if record.state in (WorkflowState.DIVERGED, WorkflowState.ROLLING_BACK) or not (
            ex.index.callbacks or ex.deleted_callbacks or ex.callback_messages):
        return  # nothing new is decided in a diverged or compensating run; a failed one may be resumed
    ended_workflow = record.state in (WorkflowState.COMPLETED, WorkflowState.TERMINATED)
    for entry in ex.deleted_callbacks:
        if entry.status is EntryStatus.PENDING:
            entry.status = EntryStatus.CANCELLED  # deleted from history: only its lookup record is closed
            ex.callback_changed(change_of(entry, "cancelled", ex.now()))
    ex.deleted_callbacks = []
    open_ids: set[str] = set()
    for location in list(ex.index.callbacks):
        entry = ex.index.by_location[location]
        if entry.status is not EntryStatus.PENDING or entry.callback is None:
            continue
        if ended_workflow or _scope_ended(ex, entry.location):
            _close(ex, entry, "cancelled", error=ErrorInfo(type="CallbackCancelledError",
                                                           message="its scope ended while it was open"))
        else:
            open_ids.add(completion_id(entry.callback.id, entry.callback.completion_id))
    for message in list(ex.callback_messages.values()):
        if message.id not in open_ids:
            ex.consume(message.id)


def _scope_ended(ex: Execution, location: str) -> bool:
    """True when an enclosing loop iteration has finished or an enclosing join/race branch has settled."""
    parts = location.split(SEPARATOR)
    for cut in range(1, len(parts) - 1):
        parent = ex.index.by_location.get(SEPARATOR.join(parts[:cut]))
        if parent is None:
            continue
        child = parts[cut]
        if parent.kind is EntryKind.LOOP and child.startswith(ITERATION_MARK):
            if parent.status is EntryStatus.COMPLETED or int(child[len(ITERATION_MARK):]) < parent.iteration:
                return True
        elif parent.kind in (EntryKind.JOIN, EntryKind.RACE):
            branch = parent.branches.get(child)
            if branch is not None and branch.status is not BranchStatus.PENDING:
                return True
    return False
