"""`ctx.queue.next` / `next_batch`: durable receives from the actor's typed inbox.

Completable messages may stay uncompleted while the workflow receives others (a request, then a person's
decision on another queue, then the answer): a message leaves the inbox in the commit that records its
receipt, so a later receive cannot see it again, and its completion is recorded on its own entry by message
id, so each one replays on its own (RivetKit forbids this because its completable messages stay in the
queue, visible to the next receive, until completed)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from dormant.workflow.caller import Caller
from dormant.workflow.entries import Entry, Received
from dormant.workflow.errors import QueueTimeoutError, WorkflowDefinitionError
from dormant.workflow.frame import Frame
from dormant.workflow.history import EntryKind, EntryStatus, validate_name
from dormant.workflow.signals import RollbackStop, Suspend
from dormant.workflow.steps import seconds
from dormant.workflow.waits import Outcome, wait_in_process


@dataclass
class QueueMessage:
    """A received message. `complete` is set for completable receives and answers `send(wait=True)`."""

    id: str
    name: str
    body: Any
    created_at: float
    sender: Caller | None = None  # who sent it, as recorded in history (replays see the same value)
    complete: Callable[..., Awaitable[None]] | None = field(default=None, repr=False)


class QueueApi:
    """`ctx.queue`: receives inside the workflow (sending happens in steps and actions)."""

    def __init__(self, frame: Frame) -> None:
        self._frame = frame

    async def next(self, name: str, *, names: Sequence[str] | None = None, completable: bool = False,
                   timeout: float | timedelta | None = None) -> QueueMessage:
        """Wait for one message. Raises QueueTimeoutError when `timeout` expires first."""
        messages = await self._receive(name, names=names, count=1, completable=completable, timeout=timeout)
        if not messages:
            raise QueueTimeoutError(f'queue.next("{name}") timed out after {seconds(timeout)} s without a '
                                    "message; use next_batch(...) for optional reads")
        return messages[0]

    async def next_batch(self, name: str, *, count: int = 1, names: Sequence[str] | None = None,
                         completable: bool = False,
                         timeout: float | timedelta | None = None) -> list[QueueMessage]:
        """Wait for 1..count messages; an empty list when `timeout` expires first."""
        return await self._receive(name, names=names, count=count, completable=completable, timeout=timeout)

    async def _receive(self, name: str, *, names: Sequence[str] | None, count: int, completable: bool,
                       timeout: float | timedelta | None) -> list[QueueMessage]:
        validate_name(name, "queue wait")
        frame = self._frame
        ex, scope = frame.execution, frame.scope
        frame.check_cancelled()
        if count < 1:
            raise ValueError(f'queue wait "{name}": count must be >= 1, got {count}')
        wanted: frozenset[str] | None
        if names:
            declared = ex.host.queue_names()
            wanted = frozenset(names)
            if not wanted.issubset(declared):
                raise WorkflowDefinitionError(f'queue wait "{name}" names undeclared queue(s) '
                                              f'{sorted(wanted.difference(declared))}; declared: {sorted(declared)}')
        else:  # (every declared queue: none unknown)
            wanted = ex.declared_queues
            if wanted is None:
                wanted = ex.declared_queues = frozenset(ex.host.queue_names())
        if not wanted:
            raise WorkflowDefinitionError(f'queue wait "{name}": this actor declares no queues')
        limit = seconds(timeout)
        entry = scope.claim(EntryKind.MESSAGE, name)
        if entry is None:
            if ex.rolling_back:
                raise RollbackStop()
            deadline = ex.now() + limit if limit is not None else None
            if deadline is None:  # (no field of some kinds: Entry.fresh)
                entry = ex.new_entry(EntryKind.MESSAGE, scope.child(name), name)
            else:
                entry = ex.new_entry(EntryKind.MESSAGE, scope.child(name), name, deadline=deadline)
                ex.touch(entry)  # the deadline must survive the suspension
        else:
            ex.replayed += 1
        if entry.status is not EntryStatus.COMPLETED:
            if ex.rolling_back:
                raise RollbackStop()
            ex.check_deadline()  # past the workflow's deadline, a message is not taken: the run fails instead
            while True:
                taken = ex.take_messages(wanted, count)
                if taken:
                    entry.put("messages", [Received(m.id, m.name, m.body, m.created_at, False, m.sender,
                                                    completable) for m in taken])
                    entry.status = EntryStatus.COMPLETED
                    ex.touch(entry)
                    break
                if entry.deadline is not None and ex.now() >= entry.deadline:
                    entry.put("timed_out", True)
                    entry.status = EntryStatus.COMPLETED
                    ex.touch(entry)
                    break
                if await wait_in_process(ex, entry.deadline, messages=True) is Outcome.SUSPEND:
                    raise Suspend(deadline=entry.deadline, names=wanted, reason="queue")
                frame.check_cancelled()  # a race decided while this branch waited: it lost
        return [self._deliver(entry, recorded, completable) for recorded in entry.messages]

    def _deliver(self, entry: Entry, recorded: Received, completable: bool) -> QueueMessage:
        ex = self._frame.execution
        body = ex.host.decode_body(recorded.name, recorded.body)
        message = QueueMessage(id=recorded.id, name=recorded.name, body=body, created_at=recorded.created_at,
                               sender=recorded.sender)
        if completable:
            message.complete = self._completer(entry, recorded)
        return message

    def _completer(self, entry: Entry, recorded: Received) -> Callable[..., Awaitable[None]]:
        ex = self._frame.execution
        done_in_this_run = False

        async def complete(response: Any = None) -> None:
            nonlocal done_in_this_run
            if done_in_this_run:
                raise WorkflowDefinitionError(f"queue message {recorded.id} is already completed")
            if recorded.completed or ex.rolling_back:
                done_in_this_run = True
                return  # replay: the response is already stored
            encoded = ex.host.encode_response(recorded.name, response)  # may raise: then nothing changed
            ex.check_response(recorded.id, encoded)  # too big to store: raises here, catchable, nothing changed
            done_in_this_run = True
            ex.add_response(recorded.id, encoded)
            recorded.completed = True
            ex.touch(entry)
            await ex.checkpoint()  # answer the waiting sender now, not at the next suspension

        return complete
