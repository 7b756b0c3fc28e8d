"""Setup & teardown (vars and hooks): every wake-up opens one connection and closes it when it ends."""

from __future__ import annotations

import pytest

from dormant.testing import TestEnv
from examples import vars_hooks
from examples.vars_hooks import Connection, Services, registry


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Connection]:
    connections: list[Connection] = []

    async def open_resource() -> Connection:
        connections.append(Connection(f"conn-{len(connections) + 1}"))
        return connections[-1]

    async def close_resource(resource: Connection) -> None:
        assert not resource.closed, f"{resource.name} closed twice"
        resource.closed = True

    monkeypatch.setattr(vars_hooks, "services", Services(open_resource, close_resource))
    return connections


async def test_each_wake_up_opens_and_closes_its_connection(opened: list[Connection]) -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("vars-hooks", ["main"])
        await handle.status()
        await env.run_until_idle()
        # setup found the connection on_wake opened; the wake-up ended sleeping, which closed it.
        assert [(c.name, c.closed) for c in opened] == [("conn-1", True)]
        state = await handle.get_state()  # an action is a wake-up of its own: it opens and closes one too
        assert (state.initialized, state.ticks) == (True, 0)
        assert [(c.name, c.closed) for c in opened] == [("conn-1", True), ("conn-2", True)]

        await env.advance(3)
        assert len(opened) == 5  # one wake-up per tick
        assert (await handle.get_state()).ticks == 3
        assert all(c.closed for c in opened)
        # Each tick used the connection of its own wake-up; actions used none.
        assert [c.uses for c in opened] == [0, 0, 1, 1, 1, 0]


async def test_nothing_stays_open_across_a_redeploy(opened: list[Connection]) -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("vars-hooks", ["main"])
        await handle.status()
        await env.advance(2)
    async with TestEnv(registry, store=env.store) as again:
        handle = again.client.get_or_create("vars-hooks", ["main"])
        await again.advance(2)
        state = await handle.get_state()
        assert (state.initialized, state.ticks) == (True, 4)
    assert all(c.closed for c in opened)
    assert sum(c.uses for c in opened) == 4
