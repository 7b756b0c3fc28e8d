"""Signal-driven control loop: pause, resume and stop drive the mode; stop ends the workflow."""

from __future__ import annotations

import pytest

from dormant import InvalidMessageError
from dormant.testing import TestEnv
from examples.control_loop import registry


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
        await loop.send("signals", {"kind": "resume"})  # after stop: never consumed
        await env.run_until_idle()
        assert (await loop.state()).model_dump() == {"mode": "stopped", "handled_signals": 3}
        status = await loop.status()
        assert status.workflow == "completed"
        assert status.output == "stopped"


async def test_unknown_signals_are_refused_to_the_sender() -> None:
    async with TestEnv(registry) as env:
        loop = env.client.get_or_create("control-loop", ["main"])
        with pytest.raises(InvalidMessageError):
            await loop.send("signals", {"kind": "explode"})
        await env.run_until_idle()
        assert (await loop.state()).handled_signals == 0
