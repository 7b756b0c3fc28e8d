"""Crash-safety harness: run a scenario once without faults, then once per storage call with that
call failing (before it applies, and after it applied but before the caller heard back), and check
that nothing observable changes.

What is checked for every faulty run:
- the final observation (state, status, side effects the scenario records) equals the fault-free run;
- every message sent is consumed exactly once (commit log) and nothing is left in an inbox that the
  fault-free run consumed;
- a step output, once committed, never changes in a later commit;
- every rollback handler's completion is committed exactly once per step entry, for the same steps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from dormant.actor import Registry
from dormant.errors import StorageError
from dormant.memory.store import InjectedFault, MemoryEventStore
from dormant.testing import TestEnv

Observation = dict[str, Any]


@dataclass
class Scenario:
    """A registry, the client operations to perform, and what to observe at the end."""

    name: str
    registry: Registry
    drive: Callable[[TestEnv, Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]], Awaitable[None]]
    observe: Callable[[TestEnv], Awaitable[Observation]]
    reset: Callable[[], None] = lambda: None  # clears module-level fakes between runs
    # What a consumed message id stands for across runs: ids made of something random (a callback's completion,
    # named after its token) are compared by what they are, not by their text.
    message_key: Callable[[str], str] = lambda message_id: message_id


async def retrying(operation: Callable[[], Awaitable[Any]]) -> Any:
    """What a well-behaved client does: retry an operation that failed on a storage fault (with
    the same message ids, so the retry is idempotent). A send reports the fault as SendFailedError
    (a StorageError) whose cause is the injected fault."""
    for _ in range(10):
        try:
            return await operation()
        except StorageError as error:
            if not isinstance(error, InjectedFault) and not isinstance(error.__cause__, InjectedFault):
                raise
            continue
    raise AssertionError("an operation kept failing on injected faults")


@dataclass
class RunResult:
    observation: Observation
    store: MemoryEventStore
    calls: int
    sent_ids: list[str] = field(default_factory=list)


async def run_scenario(scenario: Scenario, fault: tuple[int, Literal["before", "after"]] | None = None) -> RunResult:
    scenario.reset()
    store = MemoryEventStore()
    if fault is not None:
        store.fail_call(*fault)
    async with TestEnv(scenario.registry, store=store) as env:
        await scenario.drive(env, retrying)
        await env.run_until_idle()
        calls = store.calls
        assert fault is None or store.pending_faults() == 0, f"{scenario.name}: fault {fault} never fired"
        store.clear_faults()  # observing is not part of the scenario
        observation = await scenario.observe(env)
        return RunResult(observation=observation, store=store, calls=calls)


def consumed_counts(store: MemoryEventStore, key: Callable[[str], str] = lambda mid: mid) -> Counter[str]:
    return Counter(key(mid) for entry in store.commit_log for mid in entry.draft.consumed_ids)


def assert_step_outputs_stable(store: MemoryEventStore) -> None:
    committed: dict[tuple[str, str], Any] = {}
    for entry in store.commit_log:
        for item in entry.draft.upserts:
            if item.get("kind") == "step" and item.get("status") == "completed":
                key = (entry.ref.id, item["location"])
                output = item.get("output")
                if key in committed:
                    assert committed[key] == output, f"committed step result changed at {key}"
                committed[key] = output


def rollback_completions(store: MemoryEventStore) -> Counter[tuple[str, str]]:
    """How many times each step's rollback went from not-done to done in the commit log."""
    done: dict[tuple[str, str], bool] = {}
    transitions: Counter[tuple[str, str]] = Counter()
    for entry in store.commit_log:
        for item in entry.draft.upserts:
            key = (entry.ref.id, item["location"])
            now_done = bool(item.get("rollback_done"))
            if now_done and not done.get(key, False):
                transitions[key] += 1
            done[key] = now_done
    return transitions


async def check_crash_safety(scenario: Scenario) -> int:
    """Run every fault; returns how many faulty runs were checked."""
    baseline = await run_scenario(scenario)
    expected_consumed = consumed_counts(baseline.store, scenario.message_key)
    expected_rollbacks = rollback_completions(baseline.store)
    assert all(count == 1 for count in expected_consumed.values()), expected_consumed
    checked = 0
    for number in range(1, baseline.calls + 1):
        for when in ("before", "after"):
            result = await run_scenario(scenario, (number, when))  # type: ignore[arg-type]
            label = f"{scenario.name}: call {number} failing {when}"
            assert result.observation == baseline.observation, (
                f"{label}: outcome differs\n  expected {baseline.observation}\n  got      {result.observation}")
            consumed = consumed_counts(result.store, scenario.message_key)
            assert set(consumed) == set(expected_consumed), f"{label}: consumed {consumed} vs {expected_consumed}"
            assert all(count == 1 for count in consumed.values()), f"{label}: consumed twice: {consumed}"
            assert_step_outputs_stable(result.store)
            rollbacks = rollback_completions(result.store)
            assert rollbacks == expected_rollbacks, f"{label}: rollbacks {rollbacks} vs {expected_rollbacks}"
            checked += 1
    return checked
