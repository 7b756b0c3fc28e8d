"""dormant.aws.redelivery: a wake-up's messages stay owned while it runs; once their queue is known, the extending
task is made only when the first extension is due (a short wake-up makes none). No server: a fake SQS."""

from __future__ import annotations

import asyncio
from typing import Any

from dormant.aws.redelivery import Redelivery
from dormant.settings import Settings
from dormant.sqs.transport import QueueUrls
from tests.waiting import until_async

ARN = "arn:aws:sqs:us-east-1:000000000000:wake.fifo"
URLS = QueueUrls(wake="http://127.0.0.1:1/000000000000/wake.fifo", timers="http://127.0.0.1:1/000000000000/timers")


class FakeSqs:
    """The two calls ownership makes: the queue's visibility timeout (1 s), and extensions (recorded)."""

    def __init__(self) -> None:
        self.extensions: list[list[str]] = []

    async def get_queue_attributes(self, **_: Any) -> dict[str, Any]:
        return {"Attributes": {"VisibilityTimeout": "1"}}

    async def change_message_visibility_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        assert QueueUrl == URLS.wake and all(entry["VisibilityTimeout"] == 1 for entry in Entries)
        self.extensions.append([entry["ReceiptHandle"] for entry in Entries])
        return {"Successful": [{"Id": entry["Id"]} for entry in Entries], "Failed": []}


async def test_a_known_queues_short_wake_up_makes_no_task_and_a_long_one_is_extended() -> None:
    sqs = FakeSqs()
    redelivery = Redelivery(sqs, URLS, Settings(dlq_url="http://127.0.0.1:1/dlq", fifo_dlq_url="http://127.0.0.1:1/d"))
    records = [{"messageId": "m1", "receiptHandle": "r1", "eventSourceARN": ARN, "body": "{}"}]

    await redelivery.queue(ARN)  # (a worker's first batch from a queue looks it up)
    tasks = len(asyncio.all_tasks())
    async with redelivery.owned(records):
        assert len(asyncio.all_tasks()) == tasks  # a timer, no task
    assert sqs.extensions == [] and redelivery.extended == 0

    async with redelivery.owned(records):  # longer than a third of the timeout: extended, without waiting again
        await until_async(lambda: _extended(sqs), timeout=5, what="the first extension")
    assert sqs.extensions[0] == ["r1"] and redelivery.extended >= 1
    assert len(asyncio.all_tasks()) == tasks  # the extending task ended with the wake-up


async def _extended(sqs: FakeSqs) -> bool:
    return bool(sqs.extensions)
