"""Contexts handed to steps, actions and lifecycle hooks: where state, vars, the client and
broadcasts live (workflow code itself only gets the durable primitives)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from dormant.client import ActorOperations, Client
from dormant.core.search import SearchAttributes, Stored
from dormant.runtime.access import actor_caller
from dormant.runtime.ids import IdSource
from dormant.workflow.caller import Caller
from dormant.workflow.host import StepRun
from dormant.workflow.sleeps import epoch_seconds
from dormant.workflow.state_cell import StateCell
from dormant.workflow.steps import seconds

if TYPE_CHECKING:
    from dormant.actor import ActorDefinition
    from dormant.ports import ActorRef


class ContextServices(ActorOperations, Protocol):
    """What step, action and hook contexts need of the actor operations (the runtime's ActorService): a client's
    requests, and scheduling one of the actor's actions."""

    async def schedule_action(self, ref: ActorRef, at: float, action: str, args: list[Any], *,
                              message_id: str | None = None, sender: Caller | None = None) -> str: ...


class SelfQueue:
    """`c.queue`: send to this actor's own queues."""

    def __init__(self, owner: ActorContext) -> None:
        self._owner = owner

    async def send(self, queue_name: str, body: Any) -> str:
        owner = self._owner
        result = await owner._service.send(owner.ref, queue_name, body, message_id=owner._ids(),
                                           sender=actor_caller(owner.ref), derived_id=True)
        return result.id


class Schedule:
    """`c.schedule`: run one of this actor's actions later, durably."""

    def __init__(self, owner: ActorContext) -> None:
        self._owner = owner

    async def at(self, when: datetime | float, action: str, *args: Any) -> str:
        owner = self._owner
        return await owner._service.schedule_action(owner.ref, epoch_seconds(when), action, list(args),
                                                    message_id=owner._ids(), sender=actor_caller(owner.ref))

    async def after(self, delay: float | timedelta, action: str, *args: Any) -> str:
        return await self.at(self._owner._service.clock.now() + (seconds(delay) or 0.0), action, *args)


class ActorContext:
    """Shared by step, action and on_create contexts: full access to the actor."""

    def __init__(self, *, service: ContextServices, definition: ActorDefinition, ref: ActorRef, state: StateCell,
                 vars: Any, events: list[tuple[str, Any]], ids: IdSource, actor_input: Any = None,
                 caller: Caller | None = None, search: dict[str, Stored] | None = None,
                 search_changes: dict[str, Stored | None] | None = None) -> None:
        self._service = service
        self._definition = definition
        self._state = state
        self._events = events
        self._ids = ids
        self._search_of: tuple[dict[str, Stored] | None, dict[str, Stored | None] | None] = (search, search_changes)
        self._search: SearchAttributes | None = None  # made on first use: most steps never look
        self.ref = ref
        self.vars = vars
        self.input = actor_input
        self.caller = caller
        """Who made the request (actions, on_create): an IAM principal, JWT claims, the dev user, another
        actor; None in steps and for in-process calls without a caller."""

    # Built on use: stored, their back-reference would make every step context a reference cycle that only
    # the garbage collector can free (one per step on the hot path).
    @property
    def queue(self) -> SelfQueue:
        """Send to this actor's own queues."""
        return SelfQueue(self)

    @property
    def schedule(self) -> Schedule:
        """Run one of this actor's actions later."""
        return Schedule(self)

    @property
    def search(self) -> SearchAttributes:
        """The actor's search attributes (dormant.core.search): set them here, they are stored with this step's or
        action's commit; `dormant actors list --where` finds the actor by them."""
        view = self._search
        if view is None:
            search, changes = self._search_of
            view = self._search = SearchAttributes(self._definition.name, self._definition.search,
                                                   search if search is not None else {},
                                                   changes if changes is not None else {})
        return view

    @property
    def name(self) -> str:
        return self.ref.name

    @property
    def key(self) -> tuple[str, ...]:
        return self.ref.key

    @property
    def state(self) -> Any:
        self._state_used()
        return self._state.value

    @state.setter
    def state(self, value: BaseModel) -> None:
        if not isinstance(value, self._definition.state):
            raise TypeError(f"state must be a {self._definition.state.__name__}, got {type(value).__name__}")
        self._state_used()
        self._state.value = value

    def _state_used(self) -> None:
        """Hook for step contexts: the engine only undoes failed attempts that touched the state."""

    def now(self) -> float:
        """The clock (virtual in tests). Inside a step its use is recorded through the step's result."""
        return self._service.clock.now()

    def client(self) -> Client:
        """A client whose requests come from this actor (the target's authorization hook sees its caller)."""
        return Client(self._service, ids=self._ids, caller=actor_caller(self.ref))

    def broadcast(self, event_name: str, payload: Any) -> None:
        """Publish an event to subscribers; stored with this step's or action's commit."""
        self._events.append((event_name, self._definition.event_payload(event_name, payload)))


class StepContext(ActorContext):
    """Passed to step bodies and rollback handlers."""

    def __init__(self, *, run: StepRun, **kwargs: Any) -> None:
        super().__init__(search_changes=run.search, **kwargs)
        self._run = run
        self.location = run.location
        self.attempt = run.attempt

    def _state_used(self) -> None:
        self._run.touched_state = True

    @property
    def idempotency_key(self) -> str:
        """Stable across re-runs of this step: pass it to external services."""
        return f"{self.ref.id}:{self.location}"


class ActionContext(ActorContext):
    """Passed to actions and `on_create`."""


async def call_hook(fn: Callable[[HookContext], Any] | None, context: HookContext) -> None:
    """Run an on_wake/on_sleep hook, sync or async."""
    if fn is not None:
        result = fn(context)
        if inspect.isawaitable(result):
            await result


class HookContext:
    """Passed to `on_wake` / `on_sleep`: vars and identity (state changes belong in steps and actions)."""

    def __init__(self, ref: ActorRef, vars: Any) -> None:
        self.ref = ref
        self.vars = vars

    @property
    def key(self) -> tuple[str, ...]:
        return self.ref.key
