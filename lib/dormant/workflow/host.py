"""What the engine needs from the actor definition and the runtime: the ports of `workflow/` and the values that
cross them (no I/O here; the runtime's ActorHost and WakeWaits, and the offline replayer, implement them). This
module imports no other engine module but the history model and sizing (which imports none), so every engine module
may import it."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dormant.workflow.history import CallbackChange, QueuedMessage, WorkflowRecord
from dormant.workflow.sizing import json_sizes

if TYPE_CHECKING:
    from dormant.workflow.sizing import Unmeasured


@dataclass
class StepRun:
    """What a step (or rollback handler) attempt knows about itself; the host builds its context."""

    location: str
    attempt: int
    events: list[tuple[str, Any]] = field(default_factory=list)
    touched_state: bool = False  # set by the host when the attempt reads or writes the actor state
    search: dict[str, Any] = field(default_factory=dict)  # search attributes it set (None: unset): kept if it succeeds


class DraftSizes:
    """UTF-8 bytes of a draft's values as compact JSON (a value of None: 4, JSON's `null`). The state's may be known
    within bounds only (`state_least` to `state_most`: some of its big strings not measured yet, `unmeasured`), which
    is what most decisions need (the per-value ceiling, whether the kept-versions ring takes a snapshot); reading
    `state` measures them, once. The entries' sum is `upserts_total`; each entry's (`upserts`) may be measured only
    when it is read (`of_entries`: the memory store decides by the sum). The bounds and the sum are attributes: the
    common case pays no call."""

    __slots__ = ("_entries", "_unmeasured", "_upserts", "events", "responses", "state_least", "state_most",
                 "upserts_total")

    def __init__(self, upserts: list[int], state: int, responses: list[int], events: list[int],
                 unmeasured: tuple[Unmeasured, ...] = ()) -> None:
        self._upserts: list[int] | None = upserts
        self._entries: list[dict[str, Any]] = []
        self.upserts_total = sum(upserts)
        self.responses = responses
        self.events = events
        self.state_least = self.state_most = state
        self._unmeasured = unmeasured
        if unmeasured:  # (made twice per step: the common case is the lines above)
            for part in unmeasured:
                low, high = part.bounds()
                self.state_least, self.state_most = self.state_least + low, self.state_most + high

    @staticmethod
    def of_entries(entries: list[dict[str, Any]], total: int, state: int, responses: list[int], events: list[int],
                   unmeasured: tuple[Unmeasured, ...] = ()) -> DraftSizes:
        """Sizes whose entries are measured together (`total`, their sum), each entry's only when `upserts` is read
        (`entries`: the draft's, which a draft never changes once it is measured)."""
        sizes = DraftSizes([], state, responses, events, unmeasured)
        sizes._upserts, sizes._entries, sizes.upserts_total = None, entries, total
        return sizes

    @property
    def upserts(self) -> list[int]:
        """Each entry's size, in the draft's order."""
        if self._upserts is None:
            self._upserts, self._entries = json_sizes(self._entries), []
        return self._upserts

    @property
    def state(self) -> int:
        if self._unmeasured:
            self.state_least = self.state_most = self._known() + sum(part.size() for part in self._unmeasured)
            self._unmeasured = ()
        return self.state_least

    def _known(self) -> int:
        """The state's size but for its unmeasured strings."""
        return self.state_least - sum(part.bounds()[0] for part in self._unmeasured)

    def with_values(self, upserts: list[int], responses: list[int], events: list[int]) -> DraftSizes:
        """Sizes of the same state (measured or not, as here) and of other values."""
        return DraftSizes(upserts, self._known(), responses, events, self._unmeasured)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DraftSizes) and (self.upserts, self.state, self.responses, self.events) == (
            other.upserts, other.state, other.responses, other.events)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        state = (f"{self.state_least}..{self.state_most}" if self.state_least != self.state_most
                 else str(self.state_least))
        return (f"DraftSizes(upserts={self.upserts!r}, state={state}, responses={self.responses!r}, "
                f"events={self.events!r})")


@dataclass
class CommitDraft:
    """Everything one commit stores, atomically: entries, state, consumed messages, responses, events."""

    upserts: list[dict[str, Any]]
    deleted_prefixes: list[str]
    state: dict[str, Any] | None
    consumed_ids: list[str]
    responses: dict[str, Any]
    events: list[tuple[str, Any]]
    workflow: WorkflowRecord | None  # None: unchanged (actions)
    committed_at: float = 0.0  # the clock when the draft was made (stamps events)
    search: dict[str, Any] | None = None  # search attributes set (name -> [type code, value]) or unset (None)
    callbacks: list[CallbackChange] = field(default_factory=list)  # callbacks opened or closed (their lookups)
    # The JSON sizes of its values, measured once by the first reader (dormant.core.limits.draft_sizes) and reused by
    # the others (the store's limit check, the kept-versions ring): a draft is not changed once it is checked.
    sizes: DraftSizes | None = field(default=None, compare=False, repr=False)

    def is_empty(self) -> bool:
        return not (self.upserts or self.deleted_prefixes or self.state is not None or self.consumed_ids
                    or self.responses or self.events or self.search or self.callbacks)


# Flow control (ctx.step(..., limit=...), dormant.workflow.throttle): what the engine asks, what the host answers.
# Made for every limited step: slotted, not frozen (a frozen dataclass's __init__ costs several times a plain one's).
@dataclass(slots=True)
class SlotAsk:
    """What the engine asks the host for: a slot of `limit` for the step at `location`."""

    limit: str
    location: str
    timeout: float | None  # the step's timeout: the slot's lease follows it
    since: float  # when the step began waiting for the limit (now if it has not)
    queued: bool  # it waited before (a refusal of an earlier attempt put it in the limit's line)
    key: str | None = None  # `limit_key=`: a keyed limit's key (the host checks it against the declaration)
    priority: int | None = None  # `priority=`: 1 (served first) to 5; None: the default


class Granted:
    """A held slot; the engine hands it back to `WorkflowHost.release_limit` when the attempt ends. A host subclasses
    it with what it holds (its lease, its renewal): one object per grant."""

    __slots__ = ("limit",)

    def __init__(self, limit: str) -> None:
        self.limit = limit

    def waits(self) -> None:
        """Called by the engine before the step's body first waits (an async body), while the slot is held: the host
        starts what keeps the slot held across turns of the event loop (its lease's renewal) only then."""


@dataclass(frozen=True)
class Refused:
    """No slot now: try again at `retry_at` (a release may wake the actor sooner). `limit`: the limit as the
    workflow record names it (`waiting_for.limits`: its name, with the key and priority the step gave)."""

    limit: str
    retry_at: float


class WorkflowHost(Protocol):
    """What the engine needs from the actor definition and the runtime."""

    def queue_names(self) -> Sequence[str]: ...

    def decode_body(self, queue: str, body: Any) -> Any: ...

    def encode_response(self, queue: str, response: Any) -> Any: ...

    def step_context(self, run: StepRun) -> Any: ...

    def check_commit(self, draft: CommitDraft) -> None:
        """Raise (an exception naming the limit) if a commit of `draft` on the actor's current version could not
        be stored; no I/O. How a step whose result or state change is too big to store fails that attempt."""
        ...

    # Optional, so not declared here (the engine reads it with getattr, None when absent): `value_ceiling`, the most
    # JSON bytes each value of a draft may take for `check_commit` to pass it whatever else the draft holds, when that
    # is all it checks (the in-memory store: the per-value ceiling); None: it checks more (an item's size...), and the
    # engine checks every draft (dormant.workflow.execution.Execution.check_storable).

    # Flow control (ctx.step(..., limit=...), dormant.workflow.throttle): asked only by steps that name a limit.
    def check_limit(self, step: str, limit: str) -> None:
        """Raise WorkflowDefinitionError if `limit` is not a declared limit (no I/O)."""
        ...

    def acquire_limit(self, ask: SlotAsk) -> Granted | Refused | Coroutine[Any, Any, Granted | Refused]:
        """A slot of the limit for the step's next attempt, or when to try again: the answer itself when the host
        has it at once (the in-memory store: no coroutine), else a coroutine of it."""
        ...

    def release_limit(self, granted: Granted) -> Coroutine[Any, Any, None] | None:
        """Give the slot back (the attempt ended, however); never raises for the store's sake. None when it is back
        already, else a coroutine that gives it back."""
        ...

    # callbacks (dormant.workflow.callbacks)
    def callback_names(self) -> Sequence[str]: ...

    def decode_callback_result(self, name: str, value: Any) -> Any: ...

    def new_callback_token(self, location: str) -> str:
        """A new unguessable token for the callback at `location` (recorded: replays reuse it)."""
        ...

    def callback_url(self, token: str) -> str | None:
        """The public URL of `POST /callbacks/{token}`, or None when no public URL is configured."""
        ...


class WaitPort(Protocol):
    """What in-process waits (dormant.workflow.waits) need from the runtime: its clock, its inbox and the time
    budget."""

    @property
    def horizon(self) -> float:
        """Clock time by which every in-process wait must be over (the budget, less time to commit)."""
        ...

    @property
    def inline_wait(self) -> float:
        """Longest wait made in process with nothing else running (0 when the clock stands still)."""
        ...

    async def sleep_until(self, moment: float) -> None: ...

    async def new_messages(self, timeout: float) -> list[QueuedMessage]:
        """Queue messages and callback completions stored since the wake-up loaded (not returned before), as
        soon as there is one, or [] after `timeout` seconds."""
        ...

    async def heartbeat_deadline(self, token_hash: str) -> float | None:
        """A callback's heartbeat deadline as its heartbeats moved it (its lookup record), None if unknown."""
        ...
