"""Over uvicorn: broadcasts from steps reach a long-polling client in order, without duplicates, across a
restart of everything; and a request/response survives the worker dying between receive and complete."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from dormant.http.app import create_app
from dormant.http.client import HttpClient
from dormant.ports import ActorRef
from dormant.runtime.service import ActorService
from dormant.settings import Settings
from dormant.testing import TestEnv
from dormant.workflow.history import EntryStatus
from tests.api.apps import GATE, registry
from tests.api.support import serve


class CountingTransport(httpx.AsyncHTTPTransport):
    """Counts the event polls a client makes (a long-poll makes one per batch, not one per tick)."""

    def __init__(self) -> None:
        super().__init__()
        self.polls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            self.polls += 1
        return await super().handle_async_request(request)


async def _collect(client: HttpClient, count: int, after: int = 0) -> list[tuple[int, str, int]]:
    seen: list[tuple[int, str, int]] = []
    async for record in client.get_or_create("progress", ["job-board"]).events(after=after, follow=True):
        seen.append((record.seq, record.payload["stage"], record.payload["completed"]))
        if len(seen) == count:
            break
    return seen


async def test_broadcasts_from_steps_reach_a_long_polling_client_in_order() -> None:
    transport = CountingTransport()
    async with TestEnv(registry) as env, \
            serve(create_app(registry, Settings(dev=True), service=env.service)) as url, \
            HttpClient(url, registry=registry, transport=transport, poll_wait=20) as client:
        handle = client.get_or_create("progress", ["job-board"])
        await handle.state()  # create it, so the poll below waits on an existing actor
        listener = asyncio.create_task(_collect(client, 6))
        while transport.polls == 0:  # the long-poll is open before anything is broadcast
            await asyncio.sleep(0.005)
        for value in (1, 2, 3):
            await handle.send("jobs", {"value": value})
        seen = await asyncio.wait_for(listener, 15)
        assert seen == [(1, "running", 0), (2, "completed", 1), (3, "running", 1),
                        (4, "completed", 2), (5, "running", 2), (6, "completed", 3)]
        assert transport.polls <= 6  # woken by events, not spinning on empty answers
        assert (await handle.state()).sum == 6

    # Everything restarts (new worker env over the same store, new API server): the cursor carries on.
    async with TestEnv(registry, store=env.store) as again, \
            serve(create_app(registry, Settings(dev=True), service=again.service)) as url, \
            HttpClient(url, registry=registry) as client:
        assert await asyncio.wait_for(_collect(client, 2, after=4), 15) == [(5, "running", 2), (6, "completed", 3)]
        await client.get_or_create("progress", ["job-board"]).send("jobs", {"value": 4})
        assert await asyncio.wait_for(_collect(client, 2, after=6), 15) == [(7, "running", 3), (8, "completed", 4)]


class SwitchableTransport:
    """The API's transport: wake-ups go to whichever worker is running now."""

    def __init__(self, target: Callable[[], TestEnv]) -> None:
        self.target = target

    async def wake(self, ref: ActorRef, *, at: float | None = None, reason: str | None = None,
                   **carried: Any) -> None:
        await self.target().transport.wake(ref, at=at, reason=reason, **carried)


async def test_a_request_survives_the_worker_dying_between_receive_and_complete() -> None:
    worker = TestEnv(registry)
    await worker.__aenter__()
    current = {"worker": worker}
    api_service = ActorService(registry, worker.store, SwitchableTransport(lambda: current["worker"]),
                               worker.clock)
    ref = ActorRef(name="hanger", key=("h1",))
    async with serve(create_app(registry, Settings(dev=True), service=api_service)) as url, \
            HttpClient(url, registry=registry) as client:
            GATE.hang = True
            request = asyncio.create_task(
                client.get_or_create("hanger", ["h1"]).send("jobs", {"value": 7}, wait=True, timeout=20,
                                                            message_id="job-1"))
            await asyncio.wait_for(GATE.entered.wait(), 10)
            # The worker received the message (its consumption and the receipt step are committed) and is
            # inside the work step when it dies.
            snapshot = await worker.store.load(ref)
            assert snapshot is not None and snapshot.inbox == []
            assert {e.name: e.status for e in snapshot.history}["receipt"] == EntryStatus.COMPLETED
            GATE.hang = False
            await worker.__aexit__(None, None, None)  # the worker process is gone, mid-step
            assert not request.done()

            restarted = TestEnv(registry, store=worker.store)  # a new worker over the same table
            current["worker"] = restarted
            async with restarted:
                result = await asyncio.wait_for(request, 15)
                assert (result.status, result.id, result.response) == ("completed", "job-1", {"result": 70})
                assert GATE.runs == 2  # the work step ran again on the new worker; the receipt did not
                assert (await client.get_or_create("hanger", ["h1"]).state()).received == 1
                again = await client.get_or_create("hanger", ["h1"]).send("jobs", {"value": 7}, wait=True,
                                                                          timeout=5, message_id="job-1")
                assert again.response == {"result": 70} and GATE.runs == 2  # answered again, not re-run
