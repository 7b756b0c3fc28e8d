"""Actor definitions: `actor()`, `queue()`, `event()`, `callback()`, `setup()` and the registry."""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from dormant.core.flow import Limit, check_limits
from dormant.core.search import check_declaration
from dormant.core.signatures import Verifier
from dormant.errors import (
    InvalidArgumentsError,
    InvalidMessageError,
    UnknownActionError,
    UnknownActorError,
    UnknownActorOptionError,
    UnknownCallbackError,
    UnknownEventError,
    UnknownQueueError,
)
from dormant.models import Approval
from dormant.workflow.errors import WorkflowDefinitionError
from dormant.workflow.execution import to_json
from dormant.workflow.history import validate_name
from dormant.workflow.values import describe_errors

F = TypeVar("F", bound=Callable[..., Any])
B = TypeVar("B")


class NoState(BaseModel):
    """State model of actors that declare none."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class QueueSpec(Generic[B]):
    """A typed queue: `body` validates what senders send, `response` what `complete()` answers."""

    body: Any
    response: Any = None

    def validate_body(self, queue: str, body: Any) -> Any:
        return _validate(self.body, body, f'queue "{queue}" body')

    def validate_response(self, queue: str, response: Any) -> Any:
        if self.response is None:
            return to_json(response)
        return to_json(_validate(self.response, response, f'queue "{queue}" response'))

    def decode(self, body: Any) -> Any:
        return _adapter(self.body).validate_python(body)


@dataclass(frozen=True)
class EventSpec:
    payload: Any


@dataclass(frozen=True)
class CallbackSpec:
    """A callback's result type: what `POST /callbacks/{token}` must carry as `result` (or its webhook route as the
    whole body; validated before anything is stored), and what `cb.result()` returns (decoded into it); what its
    approval page says (`description`); how a request to it proves its sender (`verify`)."""

    result: Any = Any
    description: str | None = None
    verify: Verifier | None = None

    @property
    def is_approval(self) -> bool:
        """Whether its result is an Approval: then `cb.approval_url` shows a confirmation page."""
        return isinstance(self.result, type) and issubclass(self.result, Approval)

    def validate_result(self, name: str, value: Any) -> Any:
        return to_json(_validate(self.result, value, f'callback "{name}" result'),
                       f'the result of callback "{name}"')

    def decode(self, value: Any) -> Any:
        return _adapter(self.result).validate_python(value)


def queue(body: Any = Any, *, response: Any = None) -> QueueSpec[Any]:
    """Declare a queue whose messages validate against `body` (a pydantic model or any type)."""
    return QueueSpec(body=body, response=response)


def event(payload: Any = Any) -> EventSpec:
    """Declare an event whose broadcasts validate against `payload`."""
    return EventSpec(payload=payload)


MAX_DESCRIPTION = 1000


def callback(result: Any = Any, *, description: str | None = None, verify: Verifier | None = None) -> CallbackSpec:
    """Declare a callback (`ctx.callback(name)`) whose result validates against `result` (a model or any type).

    `description`: what the approval page (`cb.approval_url`, for `callback(Approval)`) asks the person.
    `verify(headers, body) -> bool` (e.g. `HmacSignature(secret_env="PAYMENT_WEBHOOK_SECRET")`): every HTTP request
    that completes, fails or heartbeats the callback must pass it (401 otherwise), on both of its POST routes."""
    if description is not None and (not isinstance(description, str) or len(description) > MAX_DESCRIPTION):
        raise WorkflowDefinitionError(f"callback description must be a string of at most {MAX_DESCRIPTION} "
                                      "characters")
    if verify is not None and not callable(verify):
        raise WorkflowDefinitionError("callback verify= takes a function verify(headers, body) -> bool, e.g. "
                                      'HmacSignature(secret_env="WEBHOOK_SECRET")')
    spec = CallbackSpec(result=result, description=description, verify=verify)
    if spec.is_approval and verify is not None:
        raise WorkflowDefinitionError("an approval callback takes no verify=: its page posts a form a person "
                                      "submits, which no provider signs (its token is its authorization)")
    return spec


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(tp: Any) -> TypeAdapter[Any]:
    try:
        adapter = _ADAPTERS.get(tp)
    except TypeError:  # an unhashable annotation (e.g. Annotated with unhashable metadata): not cached
        return _build_adapter(tp)
    if adapter is None:
        adapter = _ADAPTERS[tp] = _build_adapter(tp)
    return adapter


def _build_adapter(tp: Any) -> TypeAdapter[Any]:
    try:
        return TypeAdapter(tp)
    except Exception:  # a class pydantic has no schema for (in-process only): an isinstance check
        return TypeAdapter(tp, config=ConfigDict(arbitrary_types_allowed=True))


def _validate(tp: Any, value: Any, what: str) -> Any:
    try:
        return _adapter(tp).validate_python(value)
    except ValidationError as error:  # the message names fields and rules, never the rejected values
        raise InvalidMessageError(f"{what} is invalid: {describe_errors(error)}",
                                  errors=[dict(e) for e in error.errors(include_url=False, include_input=False)]
                                  ) from None


@dataclass(frozen=True)
class ActionParameter:
    name: str
    annotation: Any
    required: bool
    adapter: TypeAdapter[Any]


class ActionSignature:
    """An action's parameters after the context, with a pydantic adapter per type hint (built once).

    `validate(args)` checks the count like a call would and each value against its hint (unannotated
    parameters take anything), returning the validated values: a JSON object for a model parameter
    arrives as the model, in-process and over HTTP alike."""

    def __init__(self, action: str, fn: Callable[..., Any]) -> None:
        self.action = action
        try:
            hints = get_type_hints(fn)
        except Exception:  # unresolvable annotations (e.g. names only defined locally): accept anything
            hints = {}
        self.positional: list[ActionParameter] = []
        self.variadic: ActionParameter | None = None
        self.keyword_only: list[str] = []
        for param in list(inspect.signature(fn).parameters.values())[1:]:  # the context comes first
            annotation = hints.get(param.name, Any)
            made = ActionParameter(param.name, annotation, param.default is inspect.Parameter.empty,
                                   _adapter(annotation))
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                self.variadic = made
            elif param.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
                self.positional.append(made)
            elif param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is inspect.Parameter.empty:
                self.keyword_only.append(param.name)
        self.returns = hints.get("return", Any)

    @property
    def required(self) -> int:
        return sum(1 for p in self.positional if p.required)

    def validate(self, args: Sequence[Any]) -> list[Any]:
        what = f'action "{self.action}"'
        if self.keyword_only:
            raise InvalidArgumentsError(f"{what} has required keyword-only parameters ({', '.join(self.keyword_only)})"
                                        " that a call cannot pass")
        if len(args) < self.required:
            missing = [p.name for p in self.positional[len(args):] if p.required]
            raise InvalidArgumentsError(f"{what} takes {self.required} required argument(s); missing: "
                                        f"{', '.join(missing)}")
        if len(args) > len(self.positional) and self.variadic is None:
            raise InvalidArgumentsError(f"{what} takes at most {len(self.positional)} argument(s), got {len(args)}")
        validated: list[Any] = []
        for index, value in enumerate(args):
            param = self.positional[index] if index < len(self.positional) else self.variadic
            assert param is not None
            try:
                validated.append(param.adapter.validate_python(value))
            except ValidationError as error:
                raise InvalidArgumentsError(f'{what}: argument "{param.name}" (position {index + 1}) is invalid: '
                                            f"{describe_errors(error)}") from None
        return validated


@dataclass
class ActorDefinition:
    """What `actor(...)` returns: an actor type with decorators for its behaviour."""

    name: str
    state: type[BaseModel] = NoState
    queues: Mapping[str, QueueSpec[Any]] = field(default_factory=dict)
    events: Mapping[str, EventSpec] = field(default_factory=dict)
    callbacks: Mapping[str, CallbackSpec] = field(default_factory=dict)
    vars: Callable[[], Any] | None = None
    workflow_fn: Callable[..., Awaitable[Any]] | None = None
    actions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    on_create_fn: Callable[..., Any] | None = None
    on_wake_fn: Callable[..., Any] | None = None
    on_sleep_fn: Callable[..., Any] | None = None
    authorize_fn: Callable[..., Any] | None = None
    search: Mapping[str, str] = field(default_factory=dict)
    """The declared search attributes: name -> type code (dormant.core.search)."""
    workflow_timeout: float | None = None
    """Seconds the workflow may run, from the actor's creation (None: no limit): past that it fails with
    WorkflowTimeoutError (docs/semantics.md, "Workflow deadline")."""
    options: dict[str, Any] = field(default_factory=dict)
    _signatures: dict[str, ActionSignature] = field(default_factory=dict, repr=False, compare=False)

    def workflow(self, fn: F) -> F:
        if self.workflow_fn is not None:
            raise WorkflowDefinitionError(f'actor "{self.name}" already has a workflow')
        self.workflow_fn = fn
        return fn

    def action(self, fn: F | None = None, *, name: str | None = None) -> Any:
        """Register an action; callable as `@a.action` or `@a.action(name="getState")`."""
        def register(f: F) -> F:
            action_name = name or f.__name__
            if action_name in self.actions:
                raise WorkflowDefinitionError(f'actor "{self.name}" already has an action "{action_name}"')
            self.actions[action_name] = f
            return f
        return register(fn) if fn is not None else register

    def on_create(self, fn: F) -> F:
        self.on_create_fn = fn
        return fn

    def on_wake(self, fn: F) -> F:
        self.on_wake_fn = fn
        return fn

    def on_sleep(self, fn: F) -> F:
        self.on_sleep_fn = fn
        return fn

    def authorize(self, fn: F) -> F:
        """The authorization hook: `fn(request: AccessRequest) -> bool` (sync or async) decides whether
        `request.caller` may do `request.operation` on this actor; only True allows (dormant.runtime.access)."""
        if self.authorize_fn is not None:
            raise WorkflowDefinitionError(f'actor "{self.name}" already has an authorization hook')
        self.authorize_fn = fn
        return fn

    # -- lookups with clear errors -------------------------------------------------------------
    def queue_spec(self, queue_name: str) -> QueueSpec[Any]:
        spec = self.queues.get(queue_name)
        if spec is None:
            # (The requested name is not repeated: errors never echo what a client sent.)
            raise UnknownQueueError(f'actor "{self.name}" has no queue of that name; '
                                    f"declared queues: {sorted(self.queues)}")
        return spec

    def callback_spec(self, name: str) -> CallbackSpec:
        spec = self.callbacks.get(name)
        if spec is None:
            raise UnknownCallbackError(f'actor "{self.name}" declares no callback of that name; '
                                       f"declared callbacks: {sorted(self.callbacks)}")
        return spec

    def action_fn(self, action_name: str) -> Callable[..., Any]:
        fn = self.actions.get(action_name)
        if fn is None:
            raise UnknownActionError(f'actor "{self.name}" has no action of that name; '
                                     f"declared actions: {sorted(self.actions)}")
        return fn

    def action_signature(self, action_name: str) -> ActionSignature:
        """The action's typed parameters (built on first use: hints may name classes defined later)."""
        signature = self._signatures.get(action_name)
        if signature is None:
            signature = self._signatures[action_name] = ActionSignature(action_name, self.action_fn(action_name))
        return signature

    def validate_arguments(self, action_name: str, args: Sequence[Any]) -> list[Any]:
        """The action's arguments checked against its signature and type hints (InvalidArgumentsError)."""
        return self.action_signature(action_name).validate(args)

    def event_payload(self, event_name: str, payload: Any) -> Any:
        spec = self.events.get(event_name)
        if spec is None:
            raise UnknownEventError(f'actor "{self.name}" has no event "{event_name}"; '
                                    f"declared events: {sorted(self.events)}")
        return to_json(_validate(spec.payload, payload, f'event "{event_name}" payload'),
                       f'the payload of event "{event_name}"')

    def initial_state(self) -> BaseModel:
        try:
            return self.state()
        except ValidationError as error:
            raise WorkflowDefinitionError(
                f'actor "{self.name}": state model {self.state.__name__} needs defaults for every field '
                f"so that a new actor can start: {error}") from None


ACTOR_KEYWORDS = ("state", "queues", "events", "callbacks", "vars", "search", "workflow_timeout")
"""The keywords `actor(...)` takes: any other is an UnknownActorOptionError."""


def actor(name: str, *, state: type[BaseModel] | None = None, queues: Mapping[str, QueueSpec[Any]] | None = None,
          events: Mapping[str, EventSpec] | None = None, callbacks: Mapping[str, CallbackSpec] | None = None,
          vars: Callable[[], Any] | None = None, search: Mapping[str, type] | None = None,
          workflow_timeout: float | timedelta | None = None, **options: Any) -> ActorDefinition:
    """Define an actor type. Decorate its workflow, actions and hooks on the returned object.

    `search` declares its search attributes, name -> str, int, float, bool or datetime (dormant.core.search): steps and
    actions set them (`c.search`), operators find actors by them (`dormant actors list --where customer=42`).
    `workflow_timeout` (seconds or a timedelta): how long the workflow may run, counted from the actor's creation;
    past it the run fails with WorkflowTimeoutError (its rollback handlers run), a sleeping actor woken for it.
    Any other keyword raises UnknownActorOptionError naming the accepted ones (a misspelt option is never ignored)."""
    if options:
        shown = ", ".join(repr(option[:40]) for option in sorted(options)[:5])
        raise UnknownActorOptionError(f'actor "{name[:80]}" got unknown option(s) {shown}: actor(...) accepts '
                                      f"{', '.join(ACTOR_KEYWORDS)}")
    if not name or "/" in name:
        raise WorkflowDefinitionError(f"actor name must be non-empty and free of '/', got {name!r}")
    for queue_name in queues or {}:
        if not queue_name or "/" in queue_name:
            raise WorkflowDefinitionError(f"queue name must be non-empty and free of '/', got {queue_name!r}")
    for callback_name, spec in (callbacks or {}).items():
        validate_name(callback_name, "callback")
        if not isinstance(spec, CallbackSpec):
            raise WorkflowDefinitionError(f'callback "{callback_name}": declare it with callback(ResultModel), '
                                          f"not {type(spec).__name__}")
    return ActorDefinition(name=name, state=state or NoState, queues=dict(queues or {}), events=dict(events or {}),
                           callbacks=dict(callbacks or {}), vars=vars, search=check_declaration(name, search or {}),
                           workflow_timeout=_timeout_seconds(name, workflow_timeout), options=options)


def _timeout_seconds(actor_name: str, timeout: float | timedelta | None) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise WorkflowDefinitionError(f'actor "{actor_name}": workflow_timeout must be seconds (a number) or a '
                                      f"timedelta, got {type(timeout).__name__}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise WorkflowDefinitionError(f'actor "{actor_name}": workflow_timeout must be positive and finite, got '
                                      f"{seconds!r} s")
    return seconds


class Registry:
    """The actor types an application serves (what `DORMANT_APP=module:attribute` points at), and the limits their
    steps share (dormant.core.flow)."""

    def __init__(self, actors: Sequence[ActorDefinition], *, limits: Mapping[str, Limit] | None = None) -> None:
        self.limits: dict[str, Limit] = check_limits(limits)
        self.actors: dict[str, ActorDefinition] = {}
        for definition in actors:
            if definition.name in self.actors:
                raise WorkflowDefinitionError(f'two actors are named "{definition.name}"')
            self.actors[definition.name] = definition

    def get(self, name: str) -> ActorDefinition:
        definition = self.actors.get(name)
        if definition is None:
            raise UnknownActorError(f"no actor type of that name is registered; known: {sorted(self.actors)}")
        return definition


def setup(*actors: ActorDefinition, limits: Mapping[str, Limit] | None = None) -> Registry:
    """Collect actor definitions into a registry. `limits`: named flow-control limits their steps may use
    (`ctx.step(..., limit="stripe")`), deployment-wide: `limits={"stripe": Limit(concurrency=5, per_second=20)}`."""
    return Registry(actors, limits=limits)


def load_registry(spec: str) -> Registry:
    """`module:attribute` -> the Registry it names (what DORMANT_APP holds)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected module:attribute, got {spec!r}")
    registry = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(registry, Registry):
        raise TypeError(f"{spec} is a {type(registry).__name__}, not a dormant Registry (use setup(...))")
    return registry
