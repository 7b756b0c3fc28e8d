"""The runtime side of in-process waits (dormant.workflow.host.WaitPort): the service's clock, the store's
inbox, and the wake-up's time budget turned into a horizon on that clock."""

from __future__ import annotations

from collections.abc import Iterable

from dormant.ports import ActorRef, Clock, EventStore
from dormant.workflow.history import QueuedMessage

DEFAULT_WAKE_BUDGET = 30.0
"""Seconds of wall time a wake-up may use when its caller does not say (`wake_actor(budget=None)`)."""
COMMIT_RESERVE = 1.0
"""Seconds of the budget kept for what follows a wait: the final commit and the next timer."""
SUSPENSION_GB_SECONDS = 0.26
"""What suspending a short wait costs beyond waiting it in process, in Lambda GB-seconds on arm64: a commit, a
timer's send, receive and delete, a second invocation with its load and its logs, $3.5 per million
(docs/performance.md, "The in-process wait"). A wait shorter than this costs less waited in process."""
DEFAULT_MEMORY_MB = 512
"""The worker function's memory in template.yaml and infra/ (what `dormant dev` and tests assume)."""


def break_even_wait(memory_mb: int) -> float:
    """Seconds of waiting that cost what a suspension does, for a function of `memory_mb` (Lambda bills
    GB-seconds: twice the memory, half the wait)."""
    return round(SUSPENSION_GB_SECONDS * 1024 / memory_mb, 2)


INLINE_WAIT = break_even_wait(DEFAULT_MEMORY_MB)
"""Longest wait made in process with nothing else running, by default (0.52 s at 512 MB). Longer ones suspend:
cheaper, but a timer's SQS delay has whole-second granularity, so they wake 1-2 s after their moment."""


def inline_wait_for(setting: float | None, memory_mb: int | None) -> float:
    """The in-process wait limit: `setting` (DORMANT_INLINE_WAIT) when given, else the break-even wait for the
    function's memory (AWS_LAMBDA_FUNCTION_MEMORY_SIZE; DEFAULT_MEMORY_MB off Lambda)."""
    return setting if setting is not None else break_even_wait(memory_mb or DEFAULT_MEMORY_MB)


class WakeWaits:
    """WaitPort of one wake-up attempt."""

    def __init__(self, clock: Clock, store: EventStore, ref: ActorRef, *, horizon: float,
                 known: Iterable[str], inline_wait: float = INLINE_WAIT) -> None:
        self._clock = clock
        self._store = store
        self._ref = ref
        self._known = set(known)  # inbox ids the wake-up has seen (loaded or returned before)
        self._horizon = horizon
        # A clock that stands still (tests) never lets a wait with nothing beside it end by itself: such a
        # wait suspends instead, and a wait beside a running step ends when the test moves the clock.
        self._inline_wait = inline_wait if clock.realtime else 0.0

    @property
    def horizon(self) -> float:
        return self._horizon

    @property
    def inline_wait(self) -> float:
        return self._inline_wait

    async def sleep_until(self, moment: float) -> None:
        await self._clock.sleep_until(moment)

    async def new_messages(self, timeout: float) -> list[QueuedMessage]:
        found = await self._store.wait_inbox(self._ref, self._known, timeout)
        self._known.update(m.id for m in found)
        return [QueuedMessage(id=m.id, name=m.queue, body=m.body, created_at=m.created_at, sender=m.sender,
                              kind="callback" if m.kind == "callback" else "queue")
                for m in found if m.kind != "action"]

    async def heartbeat_deadline(self, token_hash: str) -> float | None:
        record = await self._store.read_callback(token_hash)
        return record.heartbeat_deadline if record is not None and record.state == "open" else None


def horizon(started: float, budget: float | None) -> float:
    """Clock time by which a wake-up that started at `started` must be done waiting."""
    return started + (DEFAULT_WAKE_BUDGET if budget is None else budget) - COMMIT_RESERVE
