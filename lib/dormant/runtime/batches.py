"""`send_many`: many messages to one actor's queue in one request.

What it saves (docs/performance.md, "Levers"): one client request (one API Gateway request and one API invocation
instead of N), the wake-ups sent together (SQS SendMessageBatch: ten per request instead of one), and one status
read instead of N. What it keeps, per message: its own wake-up (each SQS message carries one message, so every
later path — the worker storing what a cut-off send left, deduplication, redelivery — is the single send's) and
its own conditional inbox write. One inbox item for the whole batch would save write units, but it is not sound
here: deduplication by message id needs a conditional write per id (DynamoDB has no conditional batch write, and
commits never use transactions: DESIGN.md), and on-demand DynamoDB bills every item by its size, so
BatchWriteItem would save requests, not write units.

The messages are checked first, all of them: one invalid body refuses the whole batch with nothing stored or
sent (its index named). A wake-up queue failing half-way through says which messages are stored and which not
(BatchSendFailedError): sending the batch again with the same ids is harmless.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from dormant.core.limits import check_message_id
from dormant.errors import (
    ActorFinishedError,
    ActorNotFoundError,
    BatchSendFailedError,
    IdempotencyConflictError,
    InvalidMessageError,
    InvalidMessageIdError,
    StorageError,
    StorageRefusedError,
    TransportError,
)
from dormant.models import SendResult
from dormant.ports import ActorRef, Creation, InboxMessage, Transport
from dormant.runtime import tracing
from dormant.runtime.contexts import ContextServices
from dormant.runtime.creation import prepare_creation, stored_creation
from dormant.runtime.send_rules import check_carried_size, send_rule
from dormant.workflow.caller import Caller
from dormant.workflow.execution import to_json
from dormant.workflow.history import WorkflowRecord, WorkflowState

log = logging.getLogger("dormant.runtime.batches")
MAX_BATCH = 100  # messages per send_many (docs/limits.md)


@runtime_checkable
class BatchTransport(Protocol):
    """A transport that sends several wake-ups in one request (SQS: SendMessageBatch)."""

    async def wake_many(self, ref: ActorRef, messages: Sequence[InboxMessage], *,
                        creation: Creation | None = None) -> list[str]:
        """One wake-up per message (the first carrying `creation`); the ids of those that went out. Raises
        TransportError only when none did."""
        ...


async def wake_all(transport: Transport, ref: ActorRef, messages: Sequence[InboxMessage],
                   creation: Creation | None) -> list[str]:
    """The ids of the messages whose wake-ups went out (in one request per ten where the transport can)."""
    if isinstance(transport, BatchTransport):
        return await transport.wake_many(ref, messages, creation=creation)
    sent: list[str] = []
    for index, message in enumerate(messages):
        try:
            await transport.wake(ref, reason=f"message:{message.id}", message=message,
                                 creation=creation if index == 0 else None)
        except TransportError:
            if not sent:
                raise
            break
        sent.append(message.id)
    return sent


async def send_many(service: ContextServices, ref: ActorRef, queue_name: str, bodies: Sequence[Any], *,
                    message_ids: Sequence[str] | None = None, actor_input: Any = None,
                    sender: Caller | None = None, create: bool = True) -> list[SendResult]:
    """Store `bodies` as messages of `queue_name` in `ref`'s inbox, in order, and wake it once per message (ten
    per request). `message_ids`, one per body, are idempotency keys as for `send`. Results in body order."""
    if not bodies:
        return []
    if len(bodies) > MAX_BATCH:
        raise InvalidMessageError(f"send_many takes at most {MAX_BATCH} messages at once ({len(bodies)} given)")
    if message_ids is not None and len(message_ids) != len(bodies):
        raise InvalidMessageError("send_many: give one message id per body, or none")
    definition = service.registry.get(ref.name)
    spec = definition.queue_spec(queue_name)
    now = service.clock.now()
    messages: list[InboxMessage] = []
    for index, body in enumerate(bodies):  # every message checked before anything is sent or stored
        try:
            validated = spec.validate_body(queue_name, body)
        except InvalidMessageError as error:
            raise InvalidMessageError(f"message {index} of the batch: {error}", error.errors) from None
        try:
            message_id = check_message_id(message_ids[index]) if message_ids is not None else str(uuid.uuid4())
        except InvalidMessageIdError as error:
            raise InvalidMessageIdError(f"message {index} of the batch: {error}") from None
        messages.append(InboxMessage(id=message_id, queue=queue_name, created_at=now, sender=sender,
                                     body=to_json(validated, f'message {index}: the body of queue "{queue_name}"')))
    traceparent = tracing.traceparent()
    if traceparent is not None:
        for message in messages:
            message.traceparent = traceparent
    if len({message.id for message in messages}) != len(messages):
        raise InvalidMessageError("send_many: two messages of the batch have the same id")
    summary = await service.store.read_summary(ref)
    if summary is None and not create:
        raise ActorNotFoundError("the actor does not exist (client.get never creates one: client.create or "
                                 "get_or_create does)")
    state = summary.status if summary is not None else WorkflowState.PENDING
    rule = send_rule(state)
    if rule == "refuse":
        raise ActorFinishedError(f"the actor is {state.value}: its workflow takes no more messages (delete the "
                                 "actor to start it afresh)")
    for message in messages:
        service.store.check_message(ref, message)
    messages = list(await asyncio.gather(*(service.store.prepare_message(ref, m) for m in messages)))
    creation = prepared = None
    if summary is None:
        creation = Creation(input=to_json(actor_input, "the actor's input"), caller=sender, requested_at=now)
        prepared = await prepare_creation(service, definition, ref, creation.input, creation.caller)
        creation = await stored_creation(service.store, ref, prepared, creation)
    for index, message in enumerate(messages):
        check_carried_size(message, creation if index == 0 else None)
    try:
        sent = await wake_all(service.transport, ref, messages, creation)
    except TransportError as error:
        raise BatchSendFailedError("no message of the batch was stored: the wake-up queue is unreachable; send "
                                   "it again", stored_ids=[], unstored_ids=[m.id for m in messages]) from error
    delivered = [message for message in messages if message.id in set(sent)]
    try:
        if prepared is not None:
            await service.store.create(ref, prepared.meta, prepared.state, WorkflowRecord(), prepared.events)
        new = await asyncio.gather(*(service.store.enqueue(ref, message) for message in delivered))
    except StorageRefusedError:
        raise
    except StorageError as error:
        log.warning("send_many to %s: the store failed after the wake-ups were sent: %s", ref, error)
        raise BatchSendFailedError("the store failed, but the wake-ups that went out carry their messages: they "
                                   "will be stored and processed; sending the batch again with the same ids is "
                                   "harmless", stored_ids=[m.id for m in delivered],
                                   unstored_ids=[m.id for m in messages if m not in delivered]) from error
    if message_ids is not None:
        for message, fresh in zip(delivered, new, strict=True):
            if not fresh and await service.store.message_fingerprint(ref, message.id) not in (
                    None, message.fingerprint()):
                raise IdempotencyConflictError(f"the id of message {messages.index(message)} of the batch was "
                                               "already used for another message; a new message needs a new id")
    if len(delivered) < len(messages):
        raise BatchSendFailedError("the wake-up queue failed part-way through the batch: the stored messages will "
                                   "be processed; send the others again (the same ids are harmless)",
                                   stored_ids=[m.id for m in delivered],
                                   unstored_ids=[m.id for m in messages if m not in delivered])
    workflow = state if rule == "hold" else None
    return [SendResult(status="queued", id=message.id, workflow=workflow) for message in messages]


def describe(results: list[SendResult]) -> dict[str, Any]:
    """The HTTP answer of a batch: ids in order, and the workflow's state when the messages wait for a resume."""
    held = next((result.workflow for result in results if result.workflow is not None), None)
    return {"status": "queued", "ids": [result.id for result in results],
            **({"workflow": held.value} if held is not None else {})}
