"""The runtime's side of flow control (`ctx.step(..., limit=...)`, docs/semantics.md "Limits"): one wake-up's slots.

The engine asks (dormant.workflow.throttle); this asks the store (`EventStore.acquire_slot`) with a lease on the
service clock, renews a held slot every third of its lease while the step runs, gives it back when the attempt ends
and wakes the waiter the store takes out of the limit's line. A refusal becomes a retry time: the first lease end
(a slot frees then even if its holder died) or, for a rate, the window of the request's place among those refused,
plus jitter so that waiters do not all come back at once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, cast

from dormant.core.flow import Limit, check_use, unknown_limit, wait_label
from dormant.core.slots import DEFAULT_PRIORITY, LimitRule, SlotLease, SlotRefusal, SlotRequest
from dormant.ports import ActorRef
from dormant.runtime.clocks import sleeping_party
from dormant.workflow.host import Granted, Refused, SlotAsk

if TYPE_CHECKING:
    from dormant.runtime.service import ActorService

log = logging.getLogger("dormant.runtime.slots")
RENEW_AFTER = 1 / 3
"""A held slot is renewed once this part of its lease has passed (so two renewals may fail before it runs out)."""
FREE_JITTER = 1.0
"""Seconds, at most (and a tenth of the lease), added at random to a concurrency waiter's retry at the first lease
end: the waiters that come back then do not all ask at the same moment."""
RATE_SPREAD = 0.5
"""A rate waiter comes back at a random moment in the first half of its window (the rest of it is for those that
arrive meanwhile, and for the delay of the timer that wakes it)."""
RENEWALS = object()
"""The `sleeping_party` of renewal tasks: a test clock's harness must not take a running step for a waiting one."""


class _AtOnce(Protocol):
    """A store's slot calls answered at once (MemoryEventStore's, marked `slots_answer_at_once`)."""

    def acquire_slot_now(self, request: SlotRequest) -> SlotLease | SlotRefusal: ...

    def release_slot_now(self, lease: SlotLease, now: float) -> list[ActorRef]: ...


class _Held(Granted):
    """A granted slot: its lease, and its renewal once the step's body waits."""

    __slots__ = ("lease", "length", "renewal", "slots")

    def __init__(self, limit: str, lease: SlotLease, length: float, slots: LimitSlots) -> None:
        self.limit, self.lease, self.length, self.slots = limit, lease, length, slots
        self.renewal: asyncio.Task[None] | None = None

    def waits(self) -> None:
        """The step's body waits, so the lease is renewed while it does (from the next turn). A rate alone holds
        nothing: nothing to renew."""
        if self.renewal is None and self.lease.slot is not None:
            self.renewal = asyncio.get_running_loop().create_task(self.slots.renewing(self.lease, self.length))


class LimitSlots:
    """The limits a wake-up's steps use (implements WorkflowHost's check_limit, acquire_limit, release_limit)."""

    def __init__(self, service: ActorService, ref: ActorRef) -> None:
        self._service = service
        self._ref = ref
        self._holder = f"{ref.id}|"  # a step's holder: this and its location
        self._store, self._clock = service.store, service.clock  # (one wake-up's: they do not change under it)
        # Each (limit, key) a step used, with its rule and the lease of a step without a timeout: looked up and made
        # once per wake-up.
        self._rules: dict[tuple[str, str | None], tuple[Limit, LimitRule, float]] = {}
        # A store that answers without I/O (memory) offers its slot calls as plain functions too; the mark is looked
        # up on its type, so that a wrapper forwarding attributes (metering, broadcasting) is never bypassed.
        at_once = getattr(type(self._store), "slots_answer_at_once", False) is True
        store = cast("_AtOnce", self._store)
        self._acquire_now: Callable[[SlotRequest], SlotLease | SlotRefusal] | None = (
            store.acquire_slot_now if at_once else None)
        self._release_now: Callable[[SlotLease, float], list[ActorRef]] | None = (
            store.release_slot_now if at_once else None)

    def _limit(self, step: str, name: str) -> Limit:
        declared = self._service.registry.limits
        limit = declared.get(name) if isinstance(name, str) else None
        if limit is None:
            raise unknown_limit(step, name, declared)
        return limit

    def check(self, step: str, name: str) -> None:
        if (name, None) not in self._rules:  # (a limit a step used, unkeyed, is declared)
            self._limit(step, name)

    def acquire(self, ask: SlotAsk) -> Granted | Refused | Coroutine[Any, Any, Granted | Refused]:
        """The answer itself from a store that answers at once (`acquire_slot_now`: memory), else a coroutine of
        it. Raises (WorkflowDefinitionError, the store's error) as the coroutine would."""
        known = self._rules.get((ask.limit, ask.key))
        if known is not None and ask.key is None and ask.priority is None:
            limit, priority = known[0], DEFAULT_PRIORITY  # (a limit used unkeyed before is not keyed: no check)
        else:
            limit = self._limit(ask.location, ask.limit) if known is None else known[0]
            priority = check_use(ask.location, ask.limit, limit, ask.key, ask.priority)  # before any I/O
            if known is None:  # (kept once its key passed the checks)
                known = self._rules[ask.limit, ask.key] = (limit, limit.rule(ask.limit, ask.key),
                                                           limit.lease_for(None))
        now = self._clock.now()
        length = known[2] if ask.timeout is None else limit.lease_for(ask.timeout)
        # (positional: a keyword call of a dataclass's __init__ costs more, once per limited step)
        request = SlotRequest(known[1], self._ref, self._holder + ask.location, now, now + length, ask.since,
                              ask.queued, priority)
        if self._acquire_now is None:
            return self._acquiring(ask, limit, length, now, request)
        answer = self._acquire_now(request)  # no coroutine, task or turn of the event loop (flow control inline)
        if isinstance(answer, SlotRefusal):
            return self._answer(ask, limit, length, now, answer)
        return _Held(ask.limit, answer, length, self)  # (`_answer`'s common case, inline)

    async def _acquiring(self, ask: SlotAsk, limit: Limit, length: float, now: float,
                         request: SlotRequest) -> Granted | Refused:
        return self._answer(ask, limit, length, now, await self._store.acquire_slot(request))

    def _answer(self, ask: SlotAsk, limit: Limit, length: float, now: float,
                answer: SlotLease | SlotRefusal) -> Granted | Refused:
        if isinstance(answer, SlotRefusal):
            retry_at = retry_time(limit, answer, now)
            log.debug("step %s of %s waits for limit %s (%s): next try in %.3f s", ask.location, self._ref,
                      ask.limit, answer.by, retry_at - now)
            return Refused(limit=wait_label(ask.limit, ask.key, ask.priority), retry_at=retry_at)
        # The renewal starts only if the step's body waits (an async body: `Granted.waits`); one that ends without
        # waiting (a plain function) gives its slot back before any turn of the event loop: no task is made (flow
        # control inline).
        return _Held(ask.limit, answer, length, self)

    def release(self, granted: Granted) -> Coroutine[Any, Any, None] | None:
        """None when the slot is back already (nothing held, or a store that answers at once and no waiter to
        wake), else a coroutine that gives it back."""
        held = granted
        assert isinstance(held, _Held)
        if held.renewal is None:
            if held.lease.slot is None:
                return None  # a rate alone holds nothing
            if self._release_now is not None:
                try:
                    woken = self._release_now(held.lease, self._clock.now())
                except Exception as error:
                    self._not_released(granted, error)
                    return None
                return self._wake(woken, granted.limit) if woken else None
        return self._releasing(granted, held)

    async def _releasing(self, granted: Granted, held: _Held) -> None:
        if held.renewal is not None:
            held.renewal.cancel()
            await asyncio.gather(held.renewal, return_exceptions=True)
        if held.lease.slot is None:
            return  # a rate alone holds nothing
        try:
            woken = await self._store.release_slot(held.lease, self._clock.now())
        except Exception as error:
            self._not_released(granted, error)
            return
        await self._wake(woken, granted.limit)

    def _not_released(self, granted: Granted, error: Exception) -> None:
        # The slot frees itself when its lease ends: the step's outcome stands
        log.warning("could not give back the slot of limit %s held by %s (it frees itself at its lease's end): "
                    "%s: %s", granted.limit, self._ref, type(error).__name__, error)

    async def _wake(self, woken: list[ActorRef], limit: str) -> None:
        for ref in woken:
            try:
                await self._service.transport.wake(ref)
            except Exception as error:  # its own timer (the first lease end) brings it back
                log.warning("could not wake %s, waiting for limit %s: %s: %s", ref, limit,
                            type(error).__name__, error)

    async def renewing(self, lease: SlotLease, length: float) -> None:
        """Renew `lease` every third of its `length` until cancelled (the release) or lost."""
        sleeping_party.set(RENEWALS)
        clock = self._service.clock
        due = lease.expires - length * (1 - RENEW_AFTER)
        while True:
            await clock.sleep_until(due)
            until = clock.now() + length
            try:
                renewed = await self._service.store.renew_slot(lease, until)
            except Exception as error:
                log.warning("could not renew the slot of limit %s held by %s (trying again): %s: %s", lease.limit,
                            self._ref, type(error).__name__, error)
                due = clock.now() + length * RENEW_AFTER / 2
                continue
            if not renewed:
                log.warning("%s lost its slot of limit %s: its lease ran out before it was renewed (a synchronous "
                            "step body that blocks longer than the lease? give the Limit a longer lease=)",
                            self._ref, lease.limit)
                return
            due = until - length * (1 - RENEW_AFTER)


def retry_time(limit: Limit, refusal: SlotRefusal, now: float) -> float:
    """When a refused step asks again (a release may wake it sooner)."""
    if refusal.by == "concurrency":
        start = max(now, refusal.free_at if refusal.free_at is not None else now)
        return start + random.uniform(0.0, min(FREE_JITTER, limit.lease / 10))
    per_window = limit.per_window or 1
    window = (refusal.window if refusal.window is not None else math.floor(now / limit.window)) + 1
    window += refusal.position // per_window  # those refused before it go first, a window's worth at a time
    return max(now, window * limit.window + random.uniform(0.0, RATE_SPREAD * limit.window))
