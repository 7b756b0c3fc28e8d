"""Flow control across actors: named limits declared once, `setup(..., limits={"stripe": Limit(...)})`, and used by
steps, `await ctx.step(name, fn, limit="stripe")` (docs/semantics.md, "Limits").

A `Limit` bounds, deployment-wide and across every actor type, how many steps that use it run at once
(`concurrency`) and how many start per second (`per_second`); a keyed one (`keyed=True`) bounds each key
(`ctx.step(..., limit_key=...)`) separately. Waiters are served by priority (`ctx.step(..., priority=1..5)`), aged
so that none starves (dormant.core.slots.line_rank). The store enforces it (dormant.ports: `acquire_slot`); this
module is the declaration and its checks. Not to be confused with `dormant.core.limits`, the table of what the
store can hold (`ServiceLimit`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dormant.core.limits import LIMIT_KEY
from dormant.core.slots import DEFAULT_AGING, DEFAULT_PRIORITY, LimitRule
from dormant.workflow.errors import WorkflowDefinitionError

DEFAULT_LEASE = 60.0
"""Seconds a slot is held without a renewal: a killed worker's slot frees itself after at most this long. A running
step renews its slot every third of its lease, so a step may run longer than its lease."""
LEASE_GRACE = 5.0
"""Seconds a slot outlives its step's timeout: the timeout cancels the step, then the release runs."""
MIN_LEASE = 1.0
MAX_LEASE = 12 * 3600.0
MAX_CONCURRENCY = 1000
"""A step that asks for a slot reads every held slot of its limit (one strongly consistent Query: about 120 bytes a
slot, so 30 read units at 1,000 held slots): the bound keeps that read small."""
MAX_PER_SECOND = 300
"""A limit's items share one DynamoDB partition, which takes 1,000 write units a second. A start costs about three
(its slot, its rate ticket, the release), so more than about 300 starts a second would need the limit sharded over
several partitions, which Dormant does not do: a higher `per_second` is refused rather than silently not served."""
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
PRIORITIES = range(1, 6)
"""`ctx.step(..., priority=)`: 1 (served first) to 5; DEFAULT_PRIORITY (3) when a step names none."""
MIN_AGING, MAX_AGING = 1.0, 3600.0


@dataclass(frozen=True)
class Limit:
    """At most `concurrency` steps that use this limit run at once, and at most `per_second` start in each second,
    across every actor of the deployment; at least one of the two. `per_second` below 1 means one start per
    1/per_second seconds (0.1: one every 10 s); from 1 on it is a whole number of starts per clock second.

    `lease`: seconds a held slot outlives its holder's last renewal (a killed worker frees its slot that long after;
    a step with a shorter `timeout` holds it for its timeout plus a few seconds).

    `keyed`: the bounds hold for each key separately (`ctx.step(..., limit="per-customer", limit_key=customer)`):
    two keys never wait for each other. `aging`: seconds of waiting worth one priority level, so that a waiter of
    priority p is never passed in line by one that began waiting more than (p - 1) * aging seconds after it."""

    concurrency: int | None = None
    per_second: float | None = None
    lease: float = DEFAULT_LEASE
    keyed: bool = False
    aging: float = DEFAULT_AGING

    def __post_init__(self) -> None:
        if self.concurrency is None and self.per_second is None:
            raise WorkflowDefinitionError("a Limit needs concurrency= (steps at once), per_second= (starts a second), "
                                          "or both")
        if self.concurrency is not None:
            if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int):
                raise WorkflowDefinitionError(f"Limit concurrency must be a whole number, got "
                                              f"{type(self.concurrency).__name__}")
            if not 1 <= self.concurrency <= MAX_CONCURRENCY:
                raise WorkflowDefinitionError(f"Limit concurrency must be 1 to {MAX_CONCURRENCY}, got "
                                              f"{self.concurrency}")
        if self.per_second is not None:
            rate = _number(self.per_second, "per_second")
            if not 0 < rate <= MAX_PER_SECOND:
                raise WorkflowDefinitionError(
                    f"Limit per_second must be above 0 and at most {MAX_PER_SECOND}, got {rate:g}: a limit's starts "
                    "are counted in one DynamoDB partition (1,000 writes a second, about 3 per start), and sharding a "
                    "limit is not supported")
            if rate >= 1 and rate != int(rate):
                raise WorkflowDefinitionError(f"Limit per_second of 1 or more must be a whole number (starts are "
                                              f"counted per clock second), got {rate:g}")
        lease = _number(self.lease, "lease")
        if not MIN_LEASE <= lease <= MAX_LEASE:
            raise WorkflowDefinitionError(f"Limit lease must be {MIN_LEASE:g} to {MAX_LEASE:g} seconds, got {lease:g}")
        if not isinstance(self.keyed, bool):
            raise WorkflowDefinitionError(f"Limit keyed must be True or False, got {type(self.keyed).__name__}")
        aging = _number(self.aging, "aging")
        if not MIN_AGING <= aging <= MAX_AGING:
            raise WorkflowDefinitionError(f"Limit aging must be {MIN_AGING:g} to {MAX_AGING:g} seconds (of waiting "
                                          f"worth one priority level), got {aging:g}")

    @property
    def window(self) -> float:
        """Seconds of one rate window: 1, or 1/per_second below one start a second."""
        if self.per_second is None or self.per_second >= 1:
            return 1.0
        return 1.0 / float(self.per_second)

    @property
    def per_window(self) -> int | None:
        """Starts allowed in one window (None: no rate limit)."""
        if self.per_second is None:
            return None
        return int(self.per_second) if self.per_second >= 1 else 1

    def rule(self, name: str, key: str | None = None) -> LimitRule:
        """What the store enforces for this limit under `name` (for a keyed limit: for `key`)."""
        return LimitRule(name=name, concurrency=self.concurrency, window=self.window, per_window=self.per_window,
                         key=key, aging=float(self.aging))

    def lease_for(self, timeout: float | None) -> float:
        """The lease of a slot taken by a step with this `timeout` (None: none): its timeout and a grace for the
        release that follows it, at most this limit's lease."""
        if timeout is None:
            return float(self.lease)
        return max(MIN_LEASE, min(float(self.lease), timeout + LEASE_GRACE))



def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise WorkflowDefinitionError(f"Limit {what} must be a finite number of seconds or starts, got "
                                      f"{type(value).__name__ if not isinstance(value, (int, float)) else value}")
    return float(value)


def check_use(step: str, name: str, limit: Limit, key: Any, priority: Any) -> int:
    """The checks of a step's `limit_key=` and `priority=` against its limit (WorkflowDefinitionError, never echoing
    the key): a key exactly when the limit is keyed, 1 to 256 bytes of UTF-8 without control characters; a priority
    of 1 to 5. Returns the priority (DEFAULT_PRIORITY when None)."""
    if limit.keyed and key is None:
        raise WorkflowDefinitionError(f'step "{step}" uses keyed limit {name!r} without limit_key=: a keyed limit '
                                      "bounds each key separately (limit_key=customer_id, say)")
    if not limit.keyed and key is not None:
        raise WorkflowDefinitionError(f'step "{step}" gives limit_key= for limit {name!r}, which is not keyed '
                                      f"(declare it Limit(..., keyed=True) to bound each key separately)")
    if key is not None:
        if not isinstance(key, str):
            raise WorkflowDefinitionError(f'step "{step}": limit_key= takes a str, got {type(key).__name__}')
        try:
            size = len(key.encode("utf-8"))
        except UnicodeEncodeError:
            raise WorkflowDefinitionError(f'step "{step}": the limit key must be valid UTF-8') from None
        if not LIMIT_KEY.minimum <= size <= LIMIT_KEY.maximum or any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F
                                                                      for ch in key):
            raise WorkflowDefinitionError(f'step "{step}": the limit key is {size:,} bytes or holds control '
                                          f"characters; a {LIMIT_KEY.name} is {LIMIT_KEY.describe()}")
    if priority is None:
        return DEFAULT_PRIORITY
    if isinstance(priority, bool) or not isinstance(priority, int) or priority not in PRIORITIES:
        raise WorkflowDefinitionError(f'step "{step}": priority= must be a whole number from 1 (served first) to 5, '
                                      f"got {priority if isinstance(priority, int) else type(priority).__name__}")
    return priority


def wait_label(name: str, key: str | None, priority: int | None) -> str:
    """How the workflow record and the status name a limit a step waits for (`waiting_for.limits`): the name alone,
    as before keys and priorities, or with them: `per-customer key="c-42" priority=1`."""
    parts = [name]
    if key is not None:
        parts.append(f"key={json.dumps(key, ensure_ascii=False)}")
    if priority is not None:
        parts.append(f"priority={priority}")
    return " ".join(parts)


def check_limits(limits: Mapping[str, Limit] | None) -> dict[str, Limit]:
    """The limits `setup(..., limits=)` declares, checked: names of 1-64 letters, digits and `_.:-` (starting with a
    letter or digit: they name DynamoDB items and appear in logs), values `Limit`s."""
    if limits is None:
        return {}
    if not isinstance(limits, Mapping):
        raise WorkflowDefinitionError(f"setup(limits=...) takes a mapping of names to Limit(...), got "
                                      f"{type(limits).__name__}")
    checked: dict[str, Limit] = {}
    for name, limit in limits.items():
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise WorkflowDefinitionError(
                "a limit name must be 1 to 64 letters, digits or _.:- and start with a letter or digit, got "
                f"{name!r}" if isinstance(name, str) and len(name) <= 80 else
                "a limit name must be 1 to 64 letters, digits or _.:- and start with a letter or digit")
        if not isinstance(limit, Limit):
            raise WorkflowDefinitionError(f'limit "{name}" must be a dormant.Limit(...), got {type(limit).__name__}')
        checked[name] = limit
    return checked


def unknown_limit(step: str, name: Any, declared: Mapping[str, Limit]) -> WorkflowDefinitionError:
    """The error of a step that names a limit setup() did not declare."""
    if not isinstance(name, str):
        return WorkflowDefinitionError(f'step "{step}": limit= takes the name of a limit (a str), got '
                                       f"{type(name).__name__}")
    return WorkflowDefinitionError(
        f'step "{step}" uses limit {name[:80]!r}, which is not declared: declared limits are '
        f"{sorted(declared) or 'none'} (declare it once: setup(..., limits={{{name[:80]!r}: Limit(...)}}))")
