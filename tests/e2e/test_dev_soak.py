"""Soak: a real `dormant dev` under many hundreds of requests, long idling, and a kill -9 with a restart in
the middle, still answering at the end with every message counted exactly once.

Idling is compressed: the pollers short-poll (`--poll-wait 0`, a receive every 50 ms per queue), so each
idle second makes the requests of a minute of 1-second long polls; the old stack froze after ~1,000 of them.
Without DORMANT_SOAK it runs the short form (about a minute); `make check` sets DORMANT_SOAK=ci (a form in between)
and `make soak` DORMANT_SOAK=long (a few minutes).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import boto3

from dormant.http.client import HttpClient
from tests.e2e.devprocess import STOP_BOUND, DevProcess, alive
from tests.servers import fake_aws_environment


@dataclass(frozen=True)
class Scale:
    actors: int
    rounds: tuple[int, ...]  # messages per actor before each restart
    idle_seconds: float
    concurrency: int = 16


SCALES = {"short": Scale(actors=30, rounds=(8, 4), idle_seconds=12),
          "ci": Scale(actors=50, rounds=(8, 5), idle_seconds=8),  # .ci/run: CI's bounded form
          "long": Scale(actors=100, rounds=(15, 10, 5), idle_seconds=30)}
SCALE = SCALES[os.environ.get("DORMANT_SOAK", "short")]


async def send_round(url: str, scale: Scale, per_actor: int, offset: int) -> int:
    """Every actor gets `per_actor` deltas (n+1 for the n-th message overall); returns requests made."""
    gate = asyncio.Semaphore(scale.concurrency)
    async with HttpClient(url, timeout=60) as client:
        async def one(actor: int, n: int) -> None:
            async with gate:
                await client.get_or_create("workflow-counter", [f"soak-{actor}"]).send("counter", {"delta": n + 1})

        await asyncio.gather(*(one(a, offset + n) for a in range(scale.actors) for n in range(per_actor)))
    return scale.actors * per_actor


async def settled(url: str, scale: Scale, sent: int, timeout: float) -> int:
    """Wait until every actor processed `sent` messages; returns the state reads made."""
    expected = {"value": sent * (sent + 1) // 2, "processed": sent}
    reads, deadline = 0, time.monotonic() + timeout
    pending = set(range(scale.actors))
    async with HttpClient(url, timeout=60) as client:
        while pending:
            for actor in sorted(pending):
                state = await client.get_or_create("workflow-counter", [f"soak-{actor}"]).state()
                reads += 1
                if state == expected:
                    pending.discard(actor)
                else:
                    assert state["processed"] <= sent and time.monotonic() < deadline, (actor, state, expected)
            await asyncio.sleep(0.2)
    return reads


def queue_depths(endpoint: str) -> dict[str, int]:
    credentials = fake_aws_environment()
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                       aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
                       aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"])
    depths = {}
    for url in sqs.list_queues().get("QueueUrls", []):
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        depths[url.rpartition("/")[2]] = sum(int(v) for v in attributes.values())
    return depths


def test_dev_stack_soak(tmp_path: Path) -> None:
    data = tmp_path / "data"
    sent = requests = 0
    for number, per_actor in enumerate(SCALE.rounds):
        dev = DevProcess(data, "--poll-wait", "0").start()
        try:
            if sent:  # after a kill -9: everything acknowledged is still there
                requests += asyncio.run(settled(dev.url, SCALE, sent, timeout=60))
            requests += asyncio.run(send_round(dev.url, SCALE, per_actor, sent))
            sent += per_actor
            requests += asyncio.run(settled(dev.url, SCALE, sent, timeout=300))
            time.sleep(SCALE.idle_seconds)  # idle, with the pollers short-polling all along
            endpoint = re.search(r"AWS +(http://\S+)", dev.output())
            assert endpoint is not None
            deadline = time.monotonic() + 30  # no stranded wake-ups: the queues drain
            while any(queue_depths(endpoint.group(1)).values()):
                assert time.monotonic() < deadline, queue_depths(endpoint.group(1))
                time.sleep(0.5)
            requests += asyncio.run(settled(dev.url, SCALE, sent, timeout=30))  # still answering after idling
            if number < len(SCALE.rounds) - 1:
                moto = dev.moto_pid()
                dev.kill()
                deadline = time.monotonic() + STOP_BOUND
                while alive(moto):
                    assert time.monotonic() < deadline, "the moto child outlived a killed dormant dev"
                    time.sleep(0.05)
            else:
                assert dev.stop() < STOP_BOUND
        finally:
            dev.kill()
    assert requests >= 500
    moto_log = (data / "moto.log").read_text(errors="replace")
    assert len(moto_log) < 20_000 and "Traceback" not in moto_log, moto_log[-3000:]
    assert "Traceback" not in dev.output()
