"""The idle timeout of a queue-driven loop (`next_batch(..., timeout=T)` that returns [] when nothing came):
armed while the loop waits, and each expiry runs one more iteration that finds no message."""

from __future__ import annotations

from typing import Any

import pytest


async def assert_idle_timeout(env: Any, handle: Any, loop_name: str, seconds: float) -> None:
    status = await handle.status()
    assert status.workflow == "sleeping"
    assert status.waiting_for.deadline == pytest.approx(env.now() + seconds)
    before = await _iteration(handle, loop_name)
    await env.advance(seconds)
    assert await _iteration(handle, loop_name) == before + 1  # the timeout ended the wait: a new iteration
    assert (await handle.status()).waiting_for.deadline == pytest.approx(env.now() + seconds)


async def _iteration(handle: Any, loop_name: str) -> int:
    entry = next(e for e in await handle.history() if e.location == loop_name)
    return int(entry.iteration)
