"""Signal-driven control loop: pause, resume and stop drive the mode; a resume after a stop still applies."""

from __future__ import annotations

import pytest

from dormant import InvalidMessageError
from dormant.testing import TestEnv
from examples.control_loop import registry
from tests.examples.idle import assert_idle_timeout


async def test_pause_resume_stop() -> None:
    async with TestEnv(registry) as env:
        loop = env.client.get_or_create("control-loop", ["main"])
        assert (await loop.call("get_state")).mode == "running"

        await loop.send("signals", {"kind": "pause"})
        await env.run_until_idle()
        assert (await loop.state()).model_dump() == {"mode": "paused", "handled_signals": 1}

        await env.advance(120)  # idle timeouts change nothing
        assert (await loop.state()).model_dump() == {"mode": "paused", "handled_signals": 1}

        await loop.send("signals", {"kind": "resume"})
        await env.run_until_idle()
        assert (await loop.state()).mode == "running"

        await loop.send("signals", {"kind": "stop"})
        await env.run_until_idle()
        assert (await loop.state()).model_dump() == {"mode": "stopped", "handled_signals": 3}
        assert (await loop.status()).workflow == "sleeping"  # stopped is a mode: the loop still listens

        await loop.send("signals", {"kind": "resume"})
        await env.run_until_idle()
        assert (await loop.state()).model_dump() == {"mode": "running", "handled_signals": 4}
        assert env.store.inbox_ids(loop.ref) == []  # no signal is left queued
        await assert_idle_timeout(env, loop, "control-loop", 30)


async def test_unknown_signals_are_refused_to_the_sender() -> None:
    async with TestEnv(registry) as env:
        loop = env.client.get_or_create("control-loop", ["main"])
        with pytest.raises(InvalidMessageError):
            await loop.send("signals", {"kind": "explode"})
        await env.run_until_idle()
        assert (await loop.state()).handled_signals == 0
