"""A new actor, prepared and stored: `on_create` run and its state checked before anything is sent or written, a
big input written first. Shared by every request that may create an actor (dormant.runtime.service: create and a
single send; dormant.runtime.batches: send_many)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dormant.ports import ActorMeta, ActorRef, Creation, EventStore
from dormant.runtime.contexts import ActionContext, ContextServices
from dormant.runtime.ids import deterministic_ids
from dormant.workflow.caller import Caller
from dormant.workflow.state_cell import StateCell

if TYPE_CHECKING:
    from dormant.actor import ActorDefinition


@dataclass(slots=True)
class PreparedCreation:
    """A new actor, prepared (on_create has run, its state is checked) but not stored yet."""

    meta: ActorMeta
    state: dict[str, Any]
    events: list[tuple[str, Any]]
    search: dict[str, Any]  # the search attributes on_create set


async def prepare_creation(service: ContextServices, definition: ActorDefinition, ref: ActorRef, input_json: Any,
                           caller: Caller | None) -> PreparedCreation:
    """Run `on_create` (`c.caller` is `caller`) on the initial state and check what it made against the store's
    limits: nothing is sent or written yet, so if it raises, nothing happened."""
    cell = StateCell(definition.state, definition.initial_state().model_dump(mode="json"))
    events: list[tuple[str, Any]] = []
    search: dict[str, Any] = {}
    if definition.on_create_fn is not None:
        context = ActionContext(service=service, definition=definition, ref=ref, state=cell,
                                vars=definition.vars() if definition.vars else None, events=events,
                                ids=deterministic_ids(f"{ref.id}|on_create"), actor_input=input_json,
                                caller=caller, search_changes=search)
        result = definition.on_create_fn(context)
        if inspect.isawaitable(result):
            await result
    state = cell.check("on_create")
    meta = ActorMeta(name=ref.name, key=ref.key, created_at=service.clock.now(), input=input_json)
    service.store.check_creation(ref, meta, state, events)  # before anything is sent or written
    return PreparedCreation(meta, state, events, {name: value for name, value in search.items() if value is not None})


async def stored_creation(store: EventStore, ref: ActorRef, prepared: PreparedCreation,
                          creation: Creation) -> Creation:
    """The creation as stored and carried: a big input written first (EventStore.prepare_input); `prepared`'s
    meta then refers to it too."""
    stored_input = await store.prepare_input(ref, creation.input)
    if stored_input is creation.input:
        return creation
    prepared.meta = prepared.meta.model_copy(update={"input": stored_input})
    return creation.model_copy(update={"input": stored_input})
