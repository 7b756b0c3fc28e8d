"""Transport on SQS (aiobotocore): immediate wake-ups on a FIFO queue, timers as delayed messages.

- Immediate wake-ups (client sends, cross-actor sends, creation) go to a FIFO queue with
  `MessageGroupId` = the actor, so one batch per actor is in flight and order holds; the
  `MessageDeduplicationId` derives from the actor and the wake-up's reason (a message id), so a
  re-sent message collapses into one wake-up within SQS's 5-minute window. A wake-up without a
  reason gets a unique id: a spare wake-up is harmless, a swallowed one would not be.
- Timers (sleeps, step retries, scheduled actions) go to a standard queue with a per-message
  `DelaySeconds` of at most `max_delay` (SQS stops at 900 s). The message carries its due time;
  a worker that receives it early re-sends it with the remaining delay ("hops") and lets the old one
  be deleted. An early, duplicate or stale timer is harmless: the wake-up finds nothing to do.

A wake-up message says "look at this actor", and carries what the request that sent it stores (the inbox
message, and how to create the actor when the request may create it): requests send their wake-up first,
then write, so a request cut off in between is completed by the worker, which stores what the store
lacks before waking the actor (docs/semantics.md). SQS messages are deleted (by the event source) only
after the wake-up committed. SQS errors raise TransportError (nothing was sent).
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict

from dormant.core.limits import SQS_DELAY, SQS_GROUP_ID
from dormant.errors import TransportError
from dormant.ports import ActorRef, Clock, Creation, InboxMessage
from dormant.runtime import tracing
from dormant.settings import Settings

MAX_SQS_DELAY = SQS_DELAY.maximum
MAX_GROUP_ID = SQS_GROUP_ID.maximum


class WakeMessage(BaseModel):
    """The body of a wake-up message (JSON)."""

    model_config = ConfigDict(extra="ignore")

    actor: str
    key: list[str]
    due: float | None = None  # timers: when it is due on the runtime's clock; None = now
    hops: int = 0
    message: InboxMessage | None = None  # the message of the send that sent this wake-up
    creation: Creation | None = None  # set when that request may have had to create the actor

    @classmethod
    def for_ref(cls, ref: ActorRef, *, due: float | None = None, hops: int = 0, message: InboxMessage | None = None,
                creation: Creation | None = None) -> WakeMessage:
        return cls(actor=ref.name, key=list(ref.key), due=due, hops=hops, message=message, creation=creation)

    @property
    def ref(self) -> ActorRef:
        return ActorRef(name=self.actor, key=tuple(self.key))


@dataclass(frozen=True)
class QueueUrls:
    """Where wake-ups go: the FIFO queue for immediate ones, the standard queue for timers."""

    wake: str
    timers: str
    wake_dlq: str | None = None
    timers_dlq: str | None = None


def group_id(ref: ActorRef) -> str:
    """The actor's FIFO message group (SQS allows 128 characters; longer ids are hashed)."""
    return ref.id if len(ref.id) <= MAX_GROUP_ID else "h:" + hashlib.sha256(ref.id.encode()).hexdigest()


def dedup_id(ref: ActorRef, reason: str | None) -> str:
    if reason is None:
        return uuid.uuid4().hex
    return hashlib.sha256(f"{ref.id}\n{reason}".encode()).hexdigest()


def timer_delay(due: float, now: float, max_delay: int) -> int:
    """Whole seconds to delay a timer message: never early (rounded up), at most `max_delay`."""
    return max(0, min(max_delay, MAX_SQS_DELAY, math.ceil(due - now)))


class SqsTransport:
    """Transport (see dormant.ports) over two SQS queues."""

    def __init__(self, sqs: Any, urls: QueueUrls, clock: Clock, *, max_delay: int = MAX_SQS_DELAY) -> None:
        self.sqs = sqs
        self.urls = urls
        self.clock = clock
        self.max_delay = max(1, min(max_delay, MAX_SQS_DELAY))
        self._fifo = urls.wake.endswith(".fifo")

    @classmethod
    async def from_settings(cls, sqs: Any, settings: Settings, clock: Clock) -> SqsTransport:
        """Queue URLs from the settings, looked up by name when not given."""
        return cls(sqs, await resolve_queue_urls(sqs, settings), clock, max_delay=settings.timer_hop_max_delay)

    async def wake(self, ref: ActorRef, *, at: float | None = None, reason: str | None = None,
                   message: InboxMessage | None = None, creation: Creation | None = None) -> None:
        if at is not None and at > self.clock.now():
            await self.send_timer(WakeMessage.for_ref(ref, due=at, message=message, creation=creation))
            return
        body = WakeMessage.for_ref(ref, message=message, creation=creation).model_dump_json(exclude_defaults=True)
        params: dict[str, Any] = {"QueueUrl": self.urls.wake, "MessageBody": body}
        if self._fifo:
            params.update(MessageGroupId=group_id(ref), MessageDeduplicationId=dedup_id(ref, reason))
        await self._send(params)

    async def wake_many(self, ref: ActorRef, messages: Sequence[InboxMessage], *,
                        creation: Creation | None = None) -> list[str]:
        """One wake-up per message on the FIFO queue (the first carrying `creation`), with SendMessageBatch: ten
        to a request, within SQS's 256 KiB. The ids of those that went out; TransportError if none did."""
        entries = []
        for index, message in enumerate(messages):
            body = WakeMessage.for_ref(ref, message=message, creation=creation if index == 0 else None
                                       ).model_dump_json(exclude_defaults=True)
            entry: dict[str, Any] = {"Id": str(index), "MessageBody": body, **_traced()}
            if self._fifo:
                entry.update(MessageGroupId=group_id(ref),
                             MessageDeduplicationId=dedup_id(ref, f"message:{message.id}"))
            entries.append(entry)
        sent: list[str] = []
        for chunk in _batches(entries):
            try:
                with tracing.client_span("SQS SendMessageBatch", {"messaging.system": "aws_sqs",
                                                                  "messaging.batch.message_count": len(chunk)}):
                    response = await self.sqs.send_message_batch(QueueUrl=self.urls.wake, Entries=chunk)
            except (ClientError, BotoCoreError) as error:
                if not sent:
                    raise TransportError(f"SQS SendMessageBatch failed: {type(error).__name__}") from error
                return sent  # the rest were not sent: the caller says which
            ok = {item["Id"] for item in response.get("Successful", [])}
            for entry in chunk:
                if entry["Id"] not in ok:
                    return sent  # FIFO order: nothing after a failed entry counts as sent
                sent.append(messages[int(entry["Id"])].id)
        return sent

    async def send_timer(self, message: WakeMessage) -> int:
        """Send (or re-send, for a hop) a timer message; returns the delay used."""
        assert message.due is not None
        delay = timer_delay(message.due, self.clock.now(), self.max_delay)
        body = message.model_dump_json(exclude_defaults=True)
        await self._send({"QueueUrl": self.urls.timers, "MessageBody": body, "DelaySeconds": delay})
        return delay

    async def _send(self, params: dict[str, Any]) -> None:
        try:
            if tracing.enabled():  # the wake-up it causes continues this trace (dormant.runtime.tracing)
                with tracing.client_span("SQS SendMessage", {"messaging.system": "aws_sqs"}):
                    await self.sqs.send_message(**params, **_traced())
            else:
                await self.sqs.send_message(**params)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            raise TransportError(f"SQS SendMessage failed: {code}") from error
        except BotoCoreError as error:
            raise TransportError(f"SQS SendMessage failed: {type(error).__name__}") from error


def _traced() -> dict[str, Any]:
    """The message attributes carrying the current trace context, if any."""
    attributes = tracing.message_attributes()
    return {"MessageAttributes": attributes} if attributes else {}


_BATCH_ENTRIES, _BATCH_BYTES = 10, 240 * 1024  # SendMessageBatch: 10 entries, 256 KiB per request


def _batches(entries: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """`entries` in order, cut into requests of at most ten and 240 KiB of bodies."""
    chunks: list[list[dict[str, Any]]] = [[]]
    size = 0
    for entry in entries:
        body = len(entry["MessageBody"].encode())
        if chunks[-1] and (len(chunks[-1]) == _BATCH_ENTRIES or size + body > _BATCH_BYTES):
            chunks.append([])
            size = 0
        chunks[-1].append(entry)
        size += body
    return [chunk for chunk in chunks if chunk]


async def resolve_queue_urls(sqs: Any, settings: Settings) -> QueueUrls:
    async def url(given: str | None, name: str) -> str:
        return given or str((await sqs.get_queue_url(QueueName=name))["QueueUrl"])

    return QueueUrls(wake=await url(settings.queue_url, settings.queue_name),
                     timers=await url(settings.timer_queue_url, settings.timer_queue_name))


RETENTION_SECONDS = 14 * 24 * 3600  # SQS's maximum: a wake-up waits out a long outage


def queue_attributes(role: str, *, visibility_timeout: int = 30, receive_wait: int = 0) -> dict[str, str]:
    """The attributes of each queue ("wake", "timers", "wake_dlq", "timers_dlq"), without names and redrive.

    The one definition of the queues: `create_queues` (tests, `dormant dev`) uses it, and the deploy tests
    check that template.yaml and infra/ declare the same (only the visibility timeout is the deployment's:
    6x the worker's timeout there, short locally so that a crashed wake-up comes back quickly).
    """
    attributes = {"MessageRetentionPeriod": str(RETENTION_SECONDS)}
    if role in ("wake", "wake_dlq"):
        attributes["FifoQueue"] = "true"
    if role == "wake":
        # Deduplication per actor (message group) lets FIFO high-throughput mode scale across actors.
        attributes.update({"ContentBasedDeduplication": "false", "DeduplicationScope": "messageGroup",
                           "FifoThroughputLimit": "perMessageGroupId"})
    if role in ("wake", "timers"):
        attributes.update({"VisibilityTimeout": str(visibility_timeout),
                           "ReceiveMessageWaitTimeSeconds": str(receive_wait)})
    return attributes


async def create_queues(sqs: Any, settings: Settings, *, visibility_timeout: int = 30,
                        receive_wait: int = 0) -> QueueUrls:
    """Create the FIFO wake-up queue, the timer queue and their DLQs (redrive after `max_receives`).

    For tests and local stacks; deployments create the same queues from template.yaml / infra/.
    """
    async def create(name: str, role: str, extra: dict[str, str]) -> tuple[str, str]:
        attributes = {**queue_attributes(role, visibility_timeout=visibility_timeout, receive_wait=receive_wait),
                      **extra}
        url = str((await sqs.create_queue(QueueName=name, Attributes=attributes))["QueueUrl"])
        arn = (await sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"]))["Attributes"]["QueueArn"]
        return url, str(arn)

    def redrive(dlq_arn: str) -> dict[str, str]:
        return {"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn,
                                             "maxReceiveCount": settings.max_receives})}

    wake_dlq, wake_dlq_arn = await create(settings.fifo_dlq_name, "wake_dlq", {})
    timers_dlq, timers_dlq_arn = await create(settings.dlq_name, "timers_dlq", {})
    wake, _ = await create(settings.queue_name, "wake", redrive(wake_dlq_arn))
    timers, _ = await create(settings.timer_queue_name, "timers", redrive(timers_dlq_arn))
    return QueueUrls(wake=wake, timers=timers, wake_dlq=wake_dlq, timers_dlq=timers_dlq)
