"""Timers: reminders fire at their time on the virtual clock, also across a redeploy."""

from __future__ import annotations

from datetime import UTC, datetime

from dormant.testing import TestEnv
from examples.timers import registry


async def test_reminder_fires_at_its_time() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("reminder", ["main"])
        await handle.send("reminders", {"text": "send weekly report", "at": env.now() + 60})
        await env.run_until_idle()
        status = await handle.status()
        assert (status.workflow, status.waiting_for.deadline) == ("sleeping", env.now() + 60)

        await env.advance(59)
        assert (await handle.get_state()).fired == []
        await env.advance(1)
        assert (await handle.get_state()).fired == ["send weekly report"]


async def test_reminders_fire_in_turn_and_past_ones_at_once() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("reminder", ["main"])
        start = env.now()
        iso = datetime.fromtimestamp(start + 3600, UTC).isoformat()
        await handle.send("reminders", {"text": "overdue", "at": start - 10})
        await handle.send("reminders", {"text": "in an hour", "at": iso})
        await handle.send("reminders", {"text": "in two hours", "at": start + 7200})
        await env.run_until_idle()
        assert (await handle.get_state()).fired == ["overdue"]

        await env.advance(3600)
        assert (await handle.get_state()).fired == ["overdue", "in an hour"]
        await env.advance(3600)
        assert (await handle.get_state()).fired == ["overdue", "in an hour", "in two hours"]


async def test_a_pending_reminder_survives_a_redeploy() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("reminder", ["main"])
        due = env.now() + 24 * 3600
        await handle.send("reminders", {"text": "renew domain", "at": due})
        await env.run_until_idle()

    # New code over the stored actor: its in-memory timers are gone, the stored deadline is not.
    async with TestEnv(registry, store=env.store) as again:
        handle = again.client.get_or_create("reminder", ["main"])
        await again.run_until_idle()
        assert (await handle.status()).waiting_for.deadline == due
        await again.advance(due - again.now())
        assert (await handle.get_state()).fired == ["renew domain"]
