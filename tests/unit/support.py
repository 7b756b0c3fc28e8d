"""Helpers shared by the unit tests: start actors, read the raw store, build quick definitions."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from dormant import ActorHandle, Registry
from dormant.memory.store import MemoryEventStore
from dormant.ports import ActorRef
from dormant.runtime.wake import WakeReport
from dormant.testing import TestEnv


class Counter(BaseModel):
    """A general-purpose state: a number and a log of what happened."""

    value: int = 0
    log: list[Any] = []


class Item(BaseModel):
    """A general-purpose queue body."""

    n: int


async def start(env: TestEnv, actor_name: str, key: str = "k", *, actor_input: Any = None) -> ActorHandle:
    """Create an actor (its first request) and run its workflow until it waits."""
    handle = env.client.get_or_create(actor_name, [key], input=actor_input)
    await handle.status()
    await env.run_until_idle()
    return handle


def raw_history(store: MemoryEventStore, ref: ActorRef) -> dict[str, dict[str, Any]]:
    """The history items the store holds for `ref` (location -> JSON)."""
    return dict(store._actors[ref.id].history)


def store_dump(store: MemoryEventStore) -> dict[str, Any]:
    """A deep copy of everything the memory store holds, to compare before/after an operation."""
    return {"actors": copy.deepcopy({k: vars(v) for k, v in store._actors.items()}),
            "early": copy.deepcopy({k: vars(v) for k, v in store._early.items()}),
            "commits": len(store.commit_log)}


def reports_for(env: TestEnv, handle: ActorHandle) -> list[WakeReport]:
    return [r for r in env.reports if r.ref == handle.ref]


def deploy(registry: Registry, store: MemoryEventStore) -> TestEnv:
    """A new deploy of `registry` over the actors already in `store`."""
    return TestEnv(registry, store=store)
