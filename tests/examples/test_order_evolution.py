"""Order evolution: v2's audit (get_version) is skipped by orders that packed under v1 and run by new ones; a
failing audit comes back as a value (try_step); the quote rides with the next commit (ephemeral); an order unpaid
for a day fails with WorkflowTimeoutError and is rolled back (workflow_timeout)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dormant import WorkflowState, WorkflowTimeoutError
from dormant.testing import TestEnv
from examples.order_evolution import ACTOR, AUDIT_RETRIES, DAY, AuditService, registry, registry_v1


@pytest.fixture(autouse=True)
def audit_up() -> Iterator[None]:
    AuditService.up = True
    yield
    AuditService.up = True


async def _started(env: Any, key: str) -> Any:
    handle = env.client.get_or_create(ACTOR, [key])
    await handle.status()
    await env.run_until_idle()
    return handle


async def test_an_order_packed_under_v1_skips_the_audit_on_v2() -> None:
    async with TestEnv(registry_v1) as env:
        await _started(env, "old")
        store = env.store
    async with TestEnv(registry, store=store) as env:
        handle = env.client.get_or_create(ACTOR, ["old"])
        await handle.send("payments", {"amount": 42})
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED and status.divergence is None, status
        state = await handle.call("get_state")
        assert state.log == ["reserved", "packed", "shipped"] and state.audit is None and state.price is None
        versions = [e.output for e in await handle.history() if e.kind == "version_check"]
        assert versions == [1]


async def test_a_new_order_is_audited_and_a_failing_audit_does_not_stop_it() -> None:
    async with TestEnv(registry) as env:
        audited = await _started(env, "new")
        state = await audited.call("get_state")
        assert (state.log, state.audit, state.price) == (["reserved", "packed"], "passed", 42)
        AuditService.up = False
        skipped = await _started(env, "audit-down")
        for _ in range(AUDIT_RETRIES):
            await env.advance(10)  # each of the audit's retries
        await skipped.send("payments", {"amount": 42})
        await env.run_until_idle()
        assert (await skipped.status()).workflow is WorkflowState.COMPLETED
        state = await skipped.call("get_state")
        assert state.log == ["reserved", "packed", "shipped"]
        assert state.audit == "skipped after 3 attempts (audit service unavailable) at 42"


async def test_an_unpaid_order_times_out_after_a_day_and_releases_its_reservation() -> None:
    async with TestEnv(registry) as env:
        handle = await _started(env, "unpaid")
        await env.advance(DAY.total_seconds() + 1)
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and status.error.startswith(WorkflowTimeoutError.__name__)
        state = await handle.call("get_state")
        assert state.log == ["reserved", "packed", "released"]


async def test_an_unpaid_order_of_v1_times_out_and_v1_releases_its_reservation() -> None:
    async with TestEnv(registry_v1) as env:
        handle = await _started(env, "unpaid-v1")
        await env.advance(DAY.total_seconds() + 1)
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED and status.error is not None
        assert status.error.startswith(WorkflowTimeoutError.__name__)
        assert (await handle.call("get_state")).log == ["reserved", "packed", "released"]


@pytest.mark.memory_only("counts the memory store's commits")
async def test_the_ephemeral_quote_costs_no_commit_of_its_own() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create(ACTOR, ["commits"])
        await handle.status()
        before = len(env.store.commit_log)
        await env.run_until_idle()
        drafts = [c.draft for c in env.store.commit_log[before:]]
        # reserve's commit (before the quote starts), then the quote with the audit (before "pack" starts), then
        # pack with the suspension: the quote is not committed alone.
        holding_quote = [d for d in drafts if any(u["location"] == "quote" for u in d.upserts)]
        assert len(holding_quote) == 1 and any(u["location"] == "audit" for u in holding_quote[0].upserts)
        assert (await handle.call("get_state")).price == 42
