"""Running an action: the one path of `POST /actors/{actor}/{key}/actions/{name}` and of the WebSocket's action frame
(docs/realtime.md), so both check, authorize, limit and answer the same way.

`check_operation` is every route's target check and authorization hook (before anything is read or written);
`call_action` validates the arguments, runs the action and turns its failures into the API's errors; the socket's
`SocketActions` wraps both into an `action_result` frame with the HTTP route's status and error code.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from dormant.actor import ActorDefinition, Registry
from dormant.core.realtime import (
    ACTION_TIMEOUT_SECONDS,
    MAX_FRAME_BYTES,
    Action,
    action_error_frame,
    action_result_frame,
)
from dormant.errors import (
    ActorNotFoundError,
    ActorPausedError,
    InvalidKeyError,
    StorageError,
    TransportError,
    VersionConflict,
    WakeFailedError,
)
from dormant.http.errors import ApiError, from_exception
from dormant.ports import ActorRef
from dormant.runtime.access import AccessRequest, Operation, check_access
from dormant.runtime.service import ActorService
from dormant.settings import Settings
from dormant.workflow.caller import Caller
from dormant.workflow.errors import InvalidJsonError, InvalidStateError
from dormant.workflow.execution import to_json
from dormant.workflow.values import check_json

log = logging.getLogger("dormant.http.actions")


async def check_operation(definition: ActorDefinition, ref: ActorRef, caller: Caller, operation: Operation,
                          target: str | None = None) -> None:
    """The target exists (404 unknown_queue / unknown_action), then the actor's hook allows it (403)."""
    if operation == "send":
        definition.queue_spec(target or "")  # UnknownQueueError -> 404
    elif operation == "call":
        definition.action_fn(target or "")  # UnknownActionError -> 404
    await check_access(definition.authorize_fn, AccessRequest(caller=caller, actor=ref.name, key=ref.key,
                                                              operation=operation, target=target))


async def call_action(service: ActorService, definition: ActorDefinition, ref: ActorRef, caller: Caller,
                      action: str, args: Any, *, create: bool) -> Any:
    """Run an authorized action with `args` (the request's JSON); its result as JSON. Raises ApiError or the
    dormant exception the API maps (dormant.http.errors)."""
    if not isinstance(args, list):
        raise ApiError(422, "invalid_arguments", "the body must be a JSON array of the action's arguments")
    check_json(args, "the arguments")  # NaN, Infinity, too deep: InvalidJsonError -> 400 invalid_json
    definition.validate_arguments(action, args)  # count and type hints: InvalidArgumentsError -> 422
    try:
        result = await service.call(ref, action, args, caller=caller, create=create)
    except (StorageError, VersionConflict, WakeFailedError, TransportError, ActorPausedError,
            ActorNotFoundError):
        raise  # (ActorPausedError: 409 actor_paused, nothing ran; ActorNotFoundError: 404 with create=false)
    except InvalidStateError as error:  # the action left the state invalid: nothing was committed
        raise ApiError(500, "action_failed", f"InvalidStateError: {error}") from None
    except Exception as error:  # the action's own failure (or its on_create's): nothing was committed
        raise ApiError(500, "action_failed", f"{type(error).__name__}: {error}") from None
    try:
        return to_json(result, "the action's result")
    except InvalidJsonError as error:
        raise ApiError(500, "action_failed", f"the action ran, but its result cannot be sent as JSON: "
                                             f"{error.rule} (at {error.path})") from None


ServiceSource = Callable[[], Awaitable[ActorService]]


class SocketActions:
    """The WebSocket's action frames (dormant.aws.realtime.Gateway hands them here): the HTTP route's path, the
    answer as an `action_result` frame."""

    def __init__(self, registry: Registry, settings: Settings, service: ServiceSource, *,
                 timeout: float = ACTION_TIMEOUT_SECONDS) -> None:
        self.registry = registry
        self.limit = settings.max_body_bytes
        self.service = service
        self.timeout = timeout

    async def __call__(self, caller: Caller, frame: Action) -> str:
        try:
            result = await self._run(caller, frame)
        except ApiError as error:
            return action_error_frame(frame.id, error.status, error.code, error.message, error.detail)
        except TimeoutError:
            return action_error_frame(frame.id, 504, "action_timed_out", (
                f"the action did not answer within {self.timeout:g} s (API Gateway's integration limit): it may "
                "have run and committed; read the actor's state to know"))
        except Exception as error:
            mapped = from_exception(error)
            if mapped is None:
                log.exception("action %s of %s over a WebSocket failed", frame.name, frame.actor)
                return action_error_frame(frame.id, 500, "internal", "internal error; see the API's logs")
            return action_error_frame(frame.id, mapped.status, mapped.code, mapped.message, mapped.detail)
        text = action_result_frame(frame.id, result)
        if text is None:
            return action_error_frame(frame.id, 413, "result_too_large", (
                f"the action ran (and committed), but its result is over a WebSocket frame's "
                f"{MAX_FRAME_BYTES // 1024} KB: call it over HTTP "
                f"(POST /actors/{{actor}}/{{key}}/actions/{frame.name}) when it returns that much "
                "(a second call runs it again)"))
        return text

    async def _run(self, caller: Caller, frame: Action) -> Any:
        definition = self.registry.get(frame.actor)  # UnknownActorError -> 404
        try:
            ref = ActorRef(name=frame.actor, key=tuple(frame.key))
        except ValidationError as error:
            raise InvalidKeyError(str(error.errors()[0]["msg"])) from None
        await check_operation(definition, ref, caller, "call", frame.name)
        size = len(json.dumps(frame.args, separators=(",", ":"), default=str).encode())
        if size > self.limit:  # as the HTTP route's body limit (its arguments are the body there)
            raise ApiError(413, "payload_too_large", f"the arguments are over the limit of {self.limit} bytes")
        service = await self.service()
        return await asyncio.wait_for(call_action(service, definition, ref, caller, frame.name, frame.args,
                                                  create=frame.create), self.timeout)
