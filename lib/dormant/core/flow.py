"""Flow control across actors: named limits declared once, `setup(..., limits={"stripe": Limit(...)})`, and used by
steps, `await ctx.step(name, fn, limit="stripe")` (docs/semantics.md, "Limits").

A `Limit` bounds, deployment-wide and across every actor type, how many steps that use it run at once
(`concurrency`) and how many start per second (`per_second`). The store enforces it (dormant.ports: `acquire_slot`);
this module is the declaration and its checks. Not to be confused with `dormant.core.limits`, the table of what the
store can hold (`ServiceLimit`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dormant.core.slots import LimitRule
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


@dataclass(frozen=True)
class Limit:
    """At most `concurrency` steps that use this limit run at once, and at most `per_second` start in each second,
    across every actor of the deployment; at least one of the two. `per_second` below 1 means one start per
    1/per_second seconds (0.1: one every 10 s); from 1 on it is a whole number of starts per clock second.

    `lease`: seconds a held slot outlives its holder's last renewal (a killed worker frees its slot that long after;
    a step with a shorter `timeout` holds it for its timeout plus a few seconds)."""

    concurrency: int | None = None
    per_second: float | None = None
    lease: float = DEFAULT_LEASE

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

    def rule(self, name: str) -> LimitRule:
        """What the store enforces for this limit under `name`."""
        return LimitRule(name=name, concurrency=self.concurrency, window=self.window, per_window=self.per_window)

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
