"""What the engine needs from the actor definition and the runtime: the one port of `workflow/` (no I/O here; the
runtime's ActorHost and the offline replayer implement it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # (execution imports this module)
    from dormant.workflow.execution import CommitDraft, StepRun
    from dormant.workflow.throttle import Granted, Refused, SlotAsk


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

    # Flow control (ctx.step(..., limit=...), dormant.workflow.throttle): asked only by steps that name a limit.
    def check_limit(self, step: str, limit: str) -> None:
        """Raise WorkflowDefinitionError if `limit` is not a declared limit (no I/O)."""
        ...

    async def acquire_limit(self, ask: SlotAsk) -> Granted | Refused:
        """A slot of the limit for the step's next attempt, or when to try again."""
        ...

    async def release_limit(self, granted: Granted) -> None:
        """Give the slot back (the attempt ended, however); never raises for the store's sake."""
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
