"""`Frame`: what a primitive needs of the scope it runs in, and the cancellation that reaches it.

Every primitive (steps, loops, queues, ...) works on a Frame: the run's `Execution`, the replay cursor of its
scope (`Scope`: its location, its recorded entries) and the `CancelToken` of the race or map it runs in. The
user-facing `WorkflowContext` wraps one and adds nothing but the public API; a primitive that runs user code in
a nested scope (a loop iteration, a join or race branch, a map item) makes the child frame here and asks it for
the context to hand that code (`Frame.context`, made by the factory the run loop gave the root frame), so no
primitive imports the context module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dormant.workflow.execution import Execution
from dormant.workflow.replay import Scope
from dormant.workflow.signals import BranchCancelled

RACE_LOST = "another branch won its race"


class CancelToken:
    """Set when a race (or a map) is decided: the losing branches (the map's items still in flight) must not
    start anything new. `reason` says why, for the steps it cuts short."""

    __slots__ = ("cancelled", "parent", "reason")

    def __init__(self, parent: CancelToken | None, reason: str = RACE_LOST) -> None:
        self.parent = parent
        self.cancelled = False
        self.reason = reason

    def is_cancelled(self) -> bool:
        return self.cancelled_by() is not None

    def cancelled_by(self) -> CancelToken | None:
        """The token of this chain that was cancelled (the innermost), or None."""
        token: CancelToken | None = self
        while token is not None:
            if token.cancelled:
                return token
            token = token.parent
        return None


ContextFactory = Callable[["Frame"], Any]


class Frame:
    """One scope of one run, as the primitives see it: `execution`, `scope` (the replay cursor), `cancel` (the
    innermost race's or map's token, None outside any)."""

    __slots__ = ("_make_context", "cancel", "execution", "scope")

    def __init__(self, execution: Execution, scope: Scope, make_context: ContextFactory,
                 cancel: CancelToken | None = None) -> None:
        self.execution = execution
        self.scope = scope
        self.cancel = cancel
        self._make_context = make_context

    def context(self) -> Any:
        """The user-facing context of this frame (a `WorkflowContext`), for the user code that runs in it."""
        return self._make_context(self)

    def child(self, location: str, *, token: CancelToken | None = None, sealed: bool = False) -> Frame:
        """The frame of a scope nested in this one at `location` (a loop iteration, a branch, a map item): its
        recorded entries, this scope's checkpoint, `token` for its cancellation (None: this frame's).
        `sealed`: it completed in history (replay only)."""
        ex = self.execution
        scope = Scope(location, ex.index.children(location), checkpointed=self.scope.checkpointed, sealed=sealed)
        return Frame(ex, scope, self._make_context, token if token is not None else self.cancel)

    def check_cancelled(self) -> None:
        """Called by every primitive before it claims or creates an entry: a branch beside it diverged (the
        wake-up stops), or its race or map was decided (it lost)."""
        divergence = self.execution.divergence
        if divergence is not None:
            raise divergence
        if self.cancel is not None and self.cancel.is_cancelled():
            raise BranchCancelled()

    def cancelled_by(self) -> CancelToken | None:
        """The decided race's or map's token that cancels this frame, or None."""
        return self.cancel.cancelled_by() if self.cancel is not None else None
