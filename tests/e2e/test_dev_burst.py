"""A burst leaves no backlog of wake-ups that do nothing. Every send leaves a wake-up message carrying its message
in the FIFO queue, while the first wake-up of an actor consumes every message stored by then; before the worker
let the rest go without a read (dormant.aws.consumed), each of them loaded and replayed its actor to find nothing
to do, and a request/response sent after 2,000 messages waited about 40 s behind them. The console's line per
wake-up shows what ran: after a burst of 300 sends over 15 actors, about one wake-up per actor and none that found
nothing to do (before: 25 of 42), and a request/response is answered at once."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import httpx

from tests.e2e.devprocess import DevProcess
from tests.e2e.test_dev_soak import queue_depths

ACTORS, PER_ACTOR = 15, 20
IDLE_WAKE_UPS_BOUND = 3  # wake-ups of the burst's actors that found nothing to do (measured 0 of 18; unfixed, 25 of 42)
ROUND_TRIP_BOUND = 3.0  # seconds; a round trip on an idle stack takes about 0.06


async def burst(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        gate = asyncio.Semaphore(20)

        async def send(actor: int, n: int) -> None:
            async with gate:
                response = await http.post(f"/actors/workflow-counter/burst-{actor}/queues/counter",
                                           json={"delta": 1}, headers={"Idempotency-Key": f"b{actor}-{n}"})
                assert response.status_code == 202, response.text

        await asyncio.gather(*(send(a, n) for a in range(ACTORS) for n in range(PER_ACTOR)))
        deadline = time.monotonic() + 120
        pending = set(range(ACTORS))
        while pending:  # every message processed, as the states show
            for actor in sorted(pending):
                state = (await http.get(f"/actors/workflow-counter/burst-{actor}/state")).json()
                if state.get("processed") == PER_ACTOR:
                    pending.discard(actor)
            assert time.monotonic() < deadline, pending
            await asyncio.sleep(0.2)


async def round_trip(url: str) -> tuple[float, dict[str, object]]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        started = time.monotonic()
        response = await http.post("/actors/request-response/after-burst/queues/requests?wait=true&timeout=20",
                                   json={"value": 21})
        return time.monotonic() - started, response.json()


def test_a_burst_leaves_no_backlog_of_idle_wake_ups(tmp_path: Path) -> None:
    dev = DevProcess(tmp_path / "data", "--poll-wait", "0", app="examples.app:registry").start()
    try:
        asyncio.run(burst(dev.url))
        seconds, answer = asyncio.run(round_trip(dev.url))
        endpoint = re.search(r"AWS +(http://\S+)", dev.output())
        assert endpoint is not None
        deadline = time.monotonic() + 60
        while any(queue_depths(endpoint.group(1)).values()):  # the burst's wake-up messages all handled
            assert time.monotonic() < deadline, queue_depths(endpoint.group(1))
            time.sleep(0.5)
        console = dev.output()
    finally:
        dev.kill()
    assert answer.get("response") == {"doubled": 42}, answer
    woke = re.findall(r"wake +workflow-counter\['burst-\d+'\] sleeping: (\d+) steps?", console)
    idle = sum(1 for steps in woke if steps == "0")
    assert sum(int(steps) for steps in woke) == ACTORS * PER_ACTOR  # every message once, in some wake-up
    assert idle <= IDLE_WAKE_UPS_BOUND, f"{idle} of {len(woke)} wake-ups found nothing to do"
    assert seconds < ROUND_TRIP_BOUND, f"the round trip after a burst of {ACTORS * PER_ACTOR} took {seconds:.1f} s"
