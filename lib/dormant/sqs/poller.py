"""Plays Lambda's SQS event source: long-polls a queue, calls the worker handler with a Lambda-shaped
SQS event, and deletes exactly the messages the handler did not report failed (ReportBatchItemFailures).

Used by the integration tests and `dormant dev`. As with Lambda: a handler that raises, or answers with a
malformed response, fails the whole batch; failed messages are not deleted and come back after the queue's
visibility timeout (a message received `maxReceiveCount` times goes to the DLQ).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

log = logging.getLogger("dormant.sqs.poller")

Handler = Callable[[dict[str, Any], Any], Any]  # returns the response, or an awaitable of it
MAX_BATCH = 10


@dataclass
class LambdaContext:
    """The parts of Lambda's context object a handler may read; the remaining time counts down from the
    function's timeout, starting when the invocation does (as Lambda's)."""

    function_name: str = "dormant-worker"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:dormant-worker"
    memory_limit_in_mb: int = 512
    timeout_ms: int = 60_000
    started: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int(self.timeout_ms - (time.monotonic() - self.started) * 1000))


@dataclass
class BatchResult:
    """One handler invocation: what was received, what the handler failed, what was deleted."""

    message_ids: list[str]
    failed: list[str]
    deleted: list[str]
    error: BaseException | None = None


def queue_arn(queue_url: str, region: str) -> str:
    """arn:aws:sqs:<region>:<account>:<name> from a queue URL (.../<account>/<name>)."""
    parts = [p for p in urlparse(queue_url).path.split("/") if p]
    account, name = (parts[-2], parts[-1]) if len(parts) >= 2 else ("000000000000", parts[-1])
    return f"arn:aws:sqs:{region}:{account}:{name}"


def lambda_event(messages: Sequence[Mapping[str, Any]], *, arn: str, region: str) -> dict[str, Any]:
    """The event Lambda passes for a batch of SQS messages."""
    return {"Records": [{
        "messageId": m["MessageId"],
        "receiptHandle": m["ReceiptHandle"],
        "body": m["Body"],
        "attributes": dict(m.get("Attributes", {})),
        "messageAttributes": dict(m.get("MessageAttributes", {})),
        "md5OfBody": m.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": region,
    } for m in messages]}


def failed_ids(response: Any, message_ids: list[str]) -> list[str]:
    """Which messages failed, read as Lambda reads a ReportBatchItemFailures response."""
    if response is None:
        return []
    if not isinstance(response, Mapping):
        return list(message_ids)
    failures = response.get("batchItemFailures")
    if failures is None:
        return []
    if not isinstance(failures, list):
        return list(message_ids)
    failed: list[str] = []
    for item in failures:
        identifier = item.get("itemIdentifier") if isinstance(item, Mapping) else None
        if not identifier or identifier not in message_ids:
            return list(message_ids)  # Lambda treats an unknown or empty identifier as a failed batch
        failed.append(identifier)
    return failed


class SqsPoller:
    """Long-polls one queue and hands batches to `handler` (sync handlers run in a worker thread)."""

    def __init__(self, sqs: Any, queue_url: str, handler: Handler, *, batch_size: int = MAX_BATCH,
                 wait_seconds: int = 1, concurrency: int = 4, region: str | None = None,
                 idle_delay: float = 0.05, function_timeout: float = 60.0) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.handler = handler
        self.batch_size = max(1, min(batch_size, MAX_BATCH))
        self.wait_seconds = wait_seconds
        self.idle_delay = idle_delay  # between short polls (wait_seconds=0) that found nothing
        self.concurrency = max(1, concurrency)
        self.function_timeout = function_timeout  # seconds: the LambdaContext's remaining time counts from it
        self.region = region or getattr(sqs.meta, "region_name", None) or "us-east-1"
        self.arn = queue_arn(queue_url, self.region)
        self.results: list[BatchResult] = []
        self._tasks: set[asyncio.Task[BatchResult | None]] = set()
        self._stopping = False
        self._running = asyncio.Event()  # cleared: paused (batches in flight still finish)
        self._running.set()
        self._receiving: asyncio.Future[list[dict[str, Any]]] | None = None
        self._asynchronous = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None))  # noqa: B004 - an object with an async __call__

    @property
    def busy(self) -> int:
        """Batches being handled right now."""
        return len(self._tasks)

    async def receive(self, wait_seconds: int | None = None) -> list[dict[str, Any]]:
        response = await self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=self.batch_size,
            WaitTimeSeconds=self.wait_seconds if wait_seconds is None else wait_seconds,
            MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"])
        return list(response.get("Messages", []))

    async def poll_once(self, wait_seconds: int | None = None) -> BatchResult | None:
        """Receive one batch and handle it; None if the queue had nothing."""
        messages = await self.receive(wait_seconds)
        return await self.handle(messages) if messages else None

    async def handle(self, messages: list[dict[str, Any]]) -> BatchResult:
        """Invoke the handler on received messages, then delete those that did not fail."""
        ids = [m["MessageId"] for m in messages]
        event = lambda_event(messages, arn=self.arn, region=self.region)
        try:
            response = await self._invoke(event)
        except Exception as error:  # a crashed invocation: the whole batch comes back later
            log.warning("worker invocation failed for %d message(s): %r", len(ids), error)
            result = BatchResult(ids, failed=list(ids), deleted=[], error=error)
        else:
            failed = failed_ids(response, ids)
            done = [m for m in messages if m["MessageId"] not in failed]
            result = BatchResult(ids, failed=failed, deleted=await self._delete(done))
        self.results.append(result)
        return result

    async def _invoke(self, event: dict[str, Any]) -> Any:
        context = LambdaContext(timeout_ms=int(self.function_timeout * 1000))
        if self._asynchronous:
            return await self.handler(event, context)
        response = await asyncio.to_thread(self.handler, event, context)
        return await response if inspect.isawaitable(response) else response

    async def _delete(self, messages: list[dict[str, Any]]) -> list[str]:
        if not messages:
            return []
        entries = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(messages)]
        response = await self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)
        for failure in response.get("Failed", []):
            log.warning("could not delete message %s: %s", messages[int(failure["Id"])]["MessageId"],
                        failure.get("Message"))
        ok = {int(entry["Id"]) for entry in response.get("Successful", [])}
        return [m["MessageId"] for n, m in enumerate(messages) if n in ok]

    async def run(self) -> None:
        """Poll until `stop()`: up to `concurrency` batches in flight (FIFO groups keep per-actor order)."""
        self._stopping = False
        while not self._stopping:
            await self._running.wait()
            if self._stopping:
                break
            while len(self._tasks) >= self.concurrency:
                await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            self._receiving = asyncio.ensure_future(self.receive())
            try:
                messages = await self._receiving
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                continue  # pause() cut the long poll short
            except Exception as error:  # the endpoint went away or was reset: try again shortly
                if self._stopping:
                    break
                log.warning("receive from %s failed: %r", self.queue_url, error)
                await asyncio.sleep(0.2)
                continue
            self._dispatch(messages)
            if not messages and self.wait_seconds == 0:
                await asyncio.sleep(self.idle_delay)

    def kick(self) -> None:
        """Look at the queue now with a short poll (a message was just sent; see _handle_then_look_again)."""
        if self.active:
            task = asyncio.get_running_loop().create_task(self._short_poll())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _short_poll(self) -> BatchResult | None:
        try:
            messages = await self.receive(wait_seconds=0)
        except Exception as error:
            log.debug("short poll of %s failed: %r", self.queue_url, error)
            return None
        self._dispatch(messages)
        return None

    def _dispatch(self, messages: list[dict[str, Any]]) -> None:
        if messages:
            task = asyncio.get_running_loop().create_task(self._handle_then_look_again(messages))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _handle_then_look_again(self, messages: list[dict[str, Any]]) -> BatchResult | None:
        result = await self.handle(messages)
        # Deleting the batch unlocks its FIFO groups, but a long poll that began while they were locked
        # does not see them until it ends: look again at once with a short poll.
        if self.active and len(self._tasks) <= self.concurrency:
            await self._short_poll()
        return result

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for the batches in flight to finish (cancel them after `timeout`)."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(list(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*pending, return_exceptions=True)

    @property
    def active(self) -> bool:
        return self._running.is_set() and not self._stopping

    def pause(self) -> None:
        """Receive nothing more until `resume()` (a test harness runs wake-ups only when it is told to).

        A long poll in progress is cut short (a message it had already taken comes back after the queue's
        visibility timeout); a short poll in progress finishes and its batch is handled."""
        self._running.clear()
        if self._receiving is not None and self.wait_seconds > 0:
            self._receiving.cancel()

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stopping = True
        self._running.set()  # let run() see the stop
