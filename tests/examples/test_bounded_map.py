"""Bounded map: a quorum write asks at most two replicas at once, is done at three acknowledgements (the fifth
replica is never asked), survives one failed replica and is aborted by a second."""

from __future__ import annotations

import asyncio

import pytest

from dormant.testing import TestEnv
from examples import bounded_map
from examples.bounded_map import REPLICAS, Services, registry


class FakeReplicas:
    """Replicas that answer after a few milliseconds; `down` ones refuse. Counts the writes in flight."""

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.asked: list[str] = []
        self.running = 0
        self.peak = 0

    async def write_replica(self, replica: str, key: str, value: str) -> str:
        self.asked.append(replica)
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(0.02)
            if replica in self.down:
                raise ConnectionError(f"{replica} is unreachable")
            return f"{replica}:{key}"
        finally:
            self.running -= 1


@pytest.fixture
def replicas(monkeypatch: pytest.MonkeyPatch) -> FakeReplicas:
    fake = FakeReplicas()
    monkeypatch.setattr(bounded_map, "services", Services(write_replica=fake.write_replica))
    return fake


async def test_a_write_is_done_at_the_quorum_with_two_in_flight(replicas: FakeReplicas) -> None:
    async with TestEnv(registry) as env:
        cluster = env.client.get_or_create("quorum-write", ["main"])
        await cluster.send("writes", {"key": "doc-1", "value": "hello"})
        await env.run_until_idle()

        state = await cluster.call("get_state")
        assert len(state.acknowledged["doc-1"]) == 3 and state.failed == {}
        assert set(state.acknowledged["doc-1"]) <= set(REPLICAS[:4])
        assert replicas.peak == 2  # never more than two writes at once
        assert "replica-5" not in replicas.asked  # the quorum was reached before its turn
        assert 3 <= len(replicas.asked) <= 4  # a fourth write may have been in flight, then cancelled
        history = {e.location: e for e in await cluster.history()}
        outcomes = [history[f"write-loop/~0/replicate/{i}"].status.value
                    for i in range(5) if f"write-loop/~0/replicate/{i}" in history]
        assert outcomes.count("completed") == 3 and "write-loop/~0/replicate/4" not in history
        assert set(outcomes) <= {"completed", "cancelled"}


async def test_one_failed_replica_is_survived(replicas: FakeReplicas) -> None:
    replicas.down = {"replica-2"}
    async with TestEnv(registry) as env:
        cluster = env.client.get_or_create("quorum-write", ["main"])
        await cluster.send("writes", {"key": "doc-1", "value": "hello"})
        await env.run_until_idle()

        state = await cluster.call("get_state")
        assert state.failed == {}
        assert state.acknowledged["doc-1"] == ["replica-1", "replica-3", "replica-4"]
        # replica-2 held its slot while its retry waited, and the quorum came first: its write was cancelled,
        # its retry never runs, and replica-5 was never asked.
        assert sorted(replicas.asked) == ["replica-1", "replica-2", "replica-3", "replica-4"]
        assert replicas.peak == 2
        history = {e.location: e for e in await cluster.history()}
        assert history["write-loop/~0/replicate/1"].status == "cancelled"
        assert (await cluster.status()).waiting_for.deadline is None  # no retry timer left


async def test_a_second_failed_replica_aborts_the_write(replicas: FakeReplicas) -> None:
    replicas.down = {"replica-1", "replica-2"}
    async with TestEnv(registry) as env:
        cluster = env.client.get_or_create("quorum-write", ["main"])
        await cluster.send("writes", {"key": "doc-1", "value": "hello"})
        await env.run_until_idle()
        await env.advance(2)

        state = await cluster.call("get_state")
        assert "doc-1" not in state.acknowledged
        assert state.failed["doc-1"] == "2 of 5 items failed, more than the 1 tolerated (tolerated_failures)"
        assert replicas.peak <= 2
        assert "replica-5" not in replicas.asked  # aborted before its turn

        replicas.down = set()  # the cluster recovers: the next write of the document reaches its quorum
        await cluster.send("writes", {"key": "doc-1", "value": "hello again"})
        await env.run_until_idle()
        state = await cluster.call("get_state")
        assert state.failed == {} and len(state.acknowledged["doc-1"]) == 3
