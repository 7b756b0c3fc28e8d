"""What the worker does with a batch's SQS messages besides letting the event source delete them.

- **Keeps them owned** while their wake-up runs: every third of the queue's visibility timeout it extends
  their visibility by a whole timeout (ChangeMessageVisibilityBatch), so a long wake-up is never delivered
  a second time meanwhile (only long ones pay: the first extension comes after a third of the timeout).
- **Backs off** a failed wake-up: its messages come back after `wake_retry_base * 2**(receives-1)` seconds
  (capped), not after the queue's whole visibility timeout.
- **Moves poison** to the dead-letter queue itself on the configured last receive, with the actor, the
  error type and message as message attributes (SQS's own redrive keeps only what a message carried).
- **Refreshes** a message received again without its actor's wake-ups failing for real (the worker was
  killed, timed out, or the store was down): a fresh message replaces it (one plain wake-up per actor unless
  a record carries what the store lacks) and it is deleted, so a healthy wake-up never reaches the
  dead-letter queue.

Queue URLs come from the records' `eventSourceARN`; a queue's visibility timeout is read once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dormant.errors import StorageError, StorageRefusedError, TransportError, VersionConflict, WakeFailedError
from dormant.ports import ActorRef
from dormant.settings import Settings
from dormant.sqs.transport import QueueUrls, group_id

log = logging.getLogger("dormant.aws.redelivery")
Record = Mapping[str, Any]
ATTRIBUTE_PREFIX = "dormant-"
MAX_ATTRIBUTE_TEXT = 1024
_BATCH = 10
_BATCH_BYTES = 240 * 1024  # SQS: 256 KiB per SendMessageBatch request


def is_transient(error: BaseException) -> bool:
    """Errors of the infrastructure, not of the actor: retried for as long as it takes, never dead-lettered."""
    if isinstance(error, StorageRefusedError):  # the store refuses the request itself: retrying cannot help
        return False
    return isinstance(error, (StorageError, TransportError, VersionConflict, WakeFailedError))


def receive_count(record: Record) -> int:
    try:
        return int(record.get("attributes", {}).get("ApproximateReceiveCount", 1))
    except (TypeError, ValueError):
        return 1


def delivered_before(record: Record) -> bool:
    """Whether this message, or the one it is a refreshed copy of, was received before."""
    return receive_count(record) > 1 or f"{ATTRIBUTE_PREFIX}refreshed" in (record.get("messageAttributes") or {})


def _interval(visibility_timeouts: Sequence[int]) -> float:
    """Seconds between extensions: a third of the shortest visibility timeout (at least 0.2)."""
    return max(0.2, min(visibility_timeouts) / 3)


def backoff_seconds(receives: int, base: float, maximum: float) -> int:
    """Visibility timeout of a failed wake-up's messages after receive number `receives`."""
    return int(max(0, min(maximum, base * 2 ** max(0, receives - 1))))


@dataclass
class _Queue:
    url: str
    visibility_timeout: int
    fifo: bool
    dead_letter_url: str | None


class Redelivery:
    """The SQS side of the worker (see the module docstring); one per Worker."""

    def __init__(self, sqs: Any, urls: QueueUrls, settings: Settings) -> None:
        self.sqs = sqs
        self.urls = urls
        self.settings = settings
        self._queues: dict[str, _Queue] = {}
        self.moved = 0  # messages this worker moved to a dead-letter queue
        self.refreshed = 0
        self.extended = 0

    async def queue(self, arn: str) -> _Queue:
        """The queue a record came from, by its eventSourceARN (arn:aws:sqs:region:account:name)."""
        known = self._queues.get(arn)
        if known is not None:
            return known
        parts = arn.split(":")
        name, account = parts[-1], parts[-2] if len(parts) >= 6 else ""
        url = next((u for u in (self.urls.wake, self.urls.timers) if u.rstrip("/").rsplit("/", 1)[-1] == name), None)
        if url is None:
            args = {"QueueName": name, **({"QueueOwnerAWSAccountId": account} if account.isdigit() else {})}
            url = str((await self.sqs.get_queue_url(**args))["QueueUrl"])
        attributes = (await self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"]))
        timeout = int(attributes.get("Attributes", {}).get("VisibilityTimeout", 30))
        fifo = name.endswith(".fifo")
        dead_letter = (self.settings.fifo_dlq_url or self.urls.wake_dlq) if fifo else (
            self.settings.dlq_url or self.urls.timers_dlq)
        if dead_letter is None:
            dlq_name = self.settings.fifo_dlq_name if fifo else self.settings.dlq_name
            with contextlib.suppress(Exception):  # without one, SQS's own redrive still applies
                dead_letter = str((await self.sqs.get_queue_url(QueueName=dlq_name))["QueueUrl"])
        queue = self._queues[arn] = _Queue(url, timeout, fifo, dead_letter)
        return queue

    # -- keeping messages owned -----------------------------------------------------------------------------
    def owned(self, records: Sequence[Record]) -> _Owned:
        """While inside (`async with`), the records' messages stay invisible (extended every third of the timeout).

        Once their queues are known (after a worker's first batch from each), the extending task starts only
        when the first extension is due: the usual wake-up, far shorter, makes and cancels no task."""
        return _Owned(self, records)

    def known_interval(self, records: Sequence[Record]) -> float | None:
        """Seconds between extensions of these records' messages (0: none to extend), or None while a queue of
        theirs is not looked up yet."""
        timeouts = []
        for record in records:
            if record.get("receiptHandle") and record.get("eventSourceARN"):
                queue = self._queues.get(str(record["eventSourceARN"]))
                if queue is None:
                    return None
                timeouts.append(queue.visibility_timeout)
        return _interval(timeouts) if timeouts else 0.0

    async def keep_owned(self, records: Sequence[Record], *, due_now: bool = False) -> None:
        """Extend the records' visibility every third of their queues' timeout, until cancelled (`due_now`: the
        first extension at once)."""
        by_queue = await self._by_queue(records)
        if not by_queue:
            return
        interval = _interval([q.visibility_timeout for q, _ in by_queue])
        while True:
            if not due_now:
                await asyncio.sleep(interval)
            due_now = False
            for queue, group in by_queue:
                try:
                    await self._change_visibility(queue, group, queue.visibility_timeout)
                    self.extended += len(group)
                except Exception as error:  # the next tick tries again; SQS redelivers at worst
                    log.warning("could not extend the visibility of %d message(s): %r", len(group), error)

    # -- after a failure ------------------------------------------------------------------------------------
    async def back_off(self, records: Sequence[Record], seconds: int) -> None:
        """Let failed messages come back after `seconds` (best effort: else after the visibility timeout)."""
        for queue, group in await self._by_queue(records):
            try:
                await self._change_visibility(queue, group, seconds)
            except Exception as error:
                log.warning("could not set the retry delay of %d message(s): %r", len(group), error)

    async def dead_letter(self, ref: ActorRef, records: Sequence[Record], error: BaseException) -> list[str]:
        """Move poison messages to their queue's DLQ with the reason as attributes; the ids moved (the event
        source may delete those)."""
        text = f"{error}"[:MAX_ATTRIBUTE_TEXT] or "(no message)"
        moved: list[str] = []
        for queue, group in await self._by_queue(records):
            if queue.dead_letter_url is None:
                continue  # SQS's own redrive moves them (without the attributes)
            entries = []
            for record in group:
                attributes = {"actor": ref.id, "actor-type": ref.name, "error-type": type(error).__name__,
                              "error-message": text, "receives": str(receive_count(record)),
                              "source-queue": queue.url.rstrip("/").rsplit("/", 1)[-1]}
                entry: dict[str, Any] = {"MessageBody": record["body"], "MessageAttributes": {
                    ATTRIBUTE_PREFIX + k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()}}
                if queue.fifo:
                    entry.update(MessageGroupId=group_id(ref), MessageDeduplicationId=str(record["messageId"])[:128])
                entries.append((record, entry))
            moved += await self._send_batch(queue.dead_letter_url, entries, ref, "move to the DLQ")
        self.moved += len(moved)
        return moved

    async def refresh(self, ref: ActorRef, records: Sequence[Record], needed: Sequence[Record], plain_body: str,
                      delay: int = 0) -> list[str]:
        """Replace interrupted messages by fresh ones (their receive count starts again) and delete them;
        returns the ids replaced (the event source may delete them too). Only `needed` records (those
        carrying what the store still lacks) are copied; when none is, one plain wake-up (`plain_body`) stands
        for them all, so refreshing never multiplies an actor's wake-ups. Batched: the fewer round trips,
        the shorter the window in which a crash finds the copies sent and the old ones not deleted (harmless:
        a spare wake-up)."""
        replaced: list[str] = []
        wanted = {str(r["messageId"]) for r in needed}
        for queue, group in await self._by_queue(records):
            bodies = [str(r["body"]) for r in group if str(r["messageId"]) in wanted] or [plain_body]
            entries: list[tuple[Record, dict[str, Any]]] = []
            for body in bodies:
                entry: dict[str, Any] = {"MessageBody": body, "MessageAttributes": {
                    f"{ATTRIBUTE_PREFIX}refreshed": {"DataType": "Number",
                                                     "StringValue": str(max(receive_count(r) for r in group))}}}
                if queue.fifo:
                    entry.update(MessageGroupId=group_id(ref), MessageDeduplicationId=uuid.uuid4().hex)
                else:
                    entry["DelaySeconds"] = max(0, min(900, delay))
                entries.append(({"messageId": str(len(entries))}, entry))
            if len(await self._send_batch(queue.url, entries, ref, "refresh")) < len(entries):
                continue  # not all went out: keep the old ones (they come back, and this is tried again)
            replaced += [str(r["messageId"]) for r in group]
            for start in range(0, len(group), _BATCH):
                entries_to_delete = [{"Id": str(n), "ReceiptHandle": r["receiptHandle"]}
                                     for n, r in enumerate(group[start:start + _BATCH])]
                with contextlib.suppress(Exception):  # the event source deletes them anyway when told they are done
                    await self.sqs.delete_message_batch(QueueUrl=queue.url, Entries=entries_to_delete)
        self.refreshed += len(replaced)
        return replaced

    async def _send_batch(self, url: str, entries: list[tuple[Record, dict[str, Any]]], ref: ActorRef,
                          what: str) -> list[str]:
        """SendMessageBatch in chunks of 10 (and under SQS's 256 KiB per request); the record ids sent."""
        sent: list[str] = []
        chunk: list[tuple[Record, dict[str, Any]]] = []
        size = 0

        async def flush() -> None:
            nonlocal chunk, size
            if not chunk:
                return
            batch = [{"Id": str(n), **entry} for n, (_, entry) in enumerate(chunk)]
            try:
                response = await self.sqs.send_message_batch(QueueUrl=url, Entries=batch)
            except Exception as failure:
                log.warning("could not %s %d message(s) of %s: %r", what, len(chunk), ref, failure)
            else:
                ok = {int(item["Id"]) for item in response.get("Successful", [])}
                sent.extend(str(chunk[n][0]["messageId"]) for n in sorted(ok))
                for item in response.get("Failed", []):
                    log.warning("could not %s a message of %s: %s", what, ref, item.get("Message"))
            chunk, size = [], 0

        for record, entry in entries:
            entry_size = len(str(entry["MessageBody"]).encode()) + 2048
            if chunk and (len(chunk) == _BATCH or size + entry_size > _BATCH_BYTES):
                await flush()
            chunk.append((record, entry))
            size += entry_size
        await flush()
        return sent

    # -- helpers --------------------------------------------------------------------------------------------
    async def _queue_of(self, record: Record) -> _Queue | None:
        try:
            return await self.queue(str(record.get("eventSourceARN", "")))
        except Exception as error:
            log.warning("unknown queue %s: %r", record.get("eventSourceARN"), error)
            return None

    async def _by_queue(self, records: Sequence[Record]) -> list[tuple[_Queue, list[Record]]]:
        groups: dict[str, list[Record]] = {}
        for record in records:
            if record.get("receiptHandle") and record.get("eventSourceARN"):
                groups.setdefault(str(record["eventSourceARN"]), []).append(record)
        result = []
        for group in groups.values():
            queue = await self._queue_of(group[0])
            if queue is not None:
                result.append((queue, group))
        return result

    async def _change_visibility(self, queue: _Queue, records: Sequence[Record], seconds: int) -> None:
        for start in range(0, len(records), _BATCH):
            entries = [{"Id": str(n), "ReceiptHandle": r["receiptHandle"], "VisibilityTimeout": int(seconds)}
                       for n, r in enumerate(records[start:start + _BATCH])]
            response = await self.sqs.change_message_visibility_batch(QueueUrl=queue.url, Entries=entries)
            for failure in response.get("Failed", []):
                log.info("visibility change refused for a message: %s", failure.get("Message"))


class _Owned:
    """`Redelivery.owned`: a plain class, not a generator-based context manager (one per wake-up: it costs less)."""

    __slots__ = ("_records", "_redelivery", "_task", "_timer")

    def __init__(self, redelivery: Redelivery, records: Sequence[Record]) -> None:
        self._redelivery = redelivery
        self._records = records
        self._task: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> None:
        interval = self._redelivery.known_interval(self._records)
        if interval is None:
            self._task = asyncio.ensure_future(self._redelivery.keep_owned(self._records))
        elif interval > 0:
            self._timer = asyncio.get_running_loop().call_later(interval, self._start)

    def _start(self) -> None:
        self._task = asyncio.ensure_future(self._redelivery.keep_owned(self._records, due_now=True))

    async def __aexit__(self, *_: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
