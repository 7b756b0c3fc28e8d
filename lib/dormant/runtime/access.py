"""Per-actor authorization: what a caller asks of an actor, and the actor's hook that allows or refuses it.

    @account.authorize
    def may(request: AccessRequest) -> bool:
        if request.caller.kind == "actor":          # other actors of this application
            return True
        return request.caller.id == request.key[0] or request.caller.has_scope("accounts/admin")

The hook runs before anything is read or written for the request: the HTTP API calls it for every actor route
(after authentication, before the body is validated), and so does an in-process `Client` that carries a
caller (`Client(service, caller=...)`, and `c.client()` inside steps and actions, whose caller is the actor).
Only `True` allows: `False`, `None` or any other value refuses with `ForbiddenError` (HTTP 403 `forbidden`),
and the hook may raise `ForbiddenError("why")` itself. An actor without a hook allows every authenticated
caller. Operator routes (history, inspector, export) need the operator token instead; the hook is not asked.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from dormant.errors import ForbiddenError
from dormant.workflow.caller import Caller

if TYPE_CHECKING:
    from dormant.ports import ActorRef

Operation = Literal["create", "send", "call", "state", "status", "events", "history"]
"""`create` (PUT), `send` (to a queue: `target`), `call` (an action: `target`), `state`, `status`, `events`
(subscribe), `history` (in-process only: over HTTP the history needs the operator token and the hook is not
asked). A send or call that creates the actor is asked as the send or call."""


@dataclass(frozen=True)
class AccessRequest:
    """What the authorization hook decides on: who, which actor, which operation."""

    caller: Caller
    actor: str
    key: tuple[str, ...]
    operation: Operation
    target: str | None = None

    @property
    def queue(self) -> str | None:
        """The queue of a `send`."""
        return self.target if self.operation == "send" else None

    @property
    def action(self) -> str | None:
        """The action of a `call`."""
        return self.target if self.operation == "call" else None

    def describe(self) -> str:
        what = {"create": "create", "send": f'send to queue "{self.target}" of', "call":
                f'call action "{self.target}" of', "state": "read the state of", "status": "read the status of",
                "events": "subscribe to the events of",
                "history": "read the history of"}[self.operation]
        return f"{what} actor {self.actor}{list(self.key)}"


AuthorizeHook = Callable[[AccessRequest], "bool | Awaitable[bool]"]


async def check_access(hook: AuthorizeHook | None, request: AccessRequest) -> None:
    """Run the actor's hook (sync or async); raise ForbiddenError unless it answers True."""
    if hook is None:
        return
    verdict = hook(request)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    if verdict is not True:
        raise ForbiddenError(f"{request.caller} may not {request.describe()}")


def actor_caller(ref: ActorRef) -> Caller:
    """The caller an actor is when it sends to or calls an actor (its own queue included)."""
    return Caller(kind="actor", id=ref.id, claims={"name": ref.name, "key": list(ref.key)})
