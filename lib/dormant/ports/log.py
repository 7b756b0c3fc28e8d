"""An actor's log: its life from creation to deletion, each version one atomic, conditional commit, and the checks
every request path makes before its first write."""

from __future__ import annotations

from typing import Any, Protocol

from dormant.core.records import ActorMeta, ActorRef, ActorSnapshot, InboxMessage, WakeError
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import WorkflowRecord


class ActorLog(Protocol):
    """Durable per-actor storage. Every `commit` is atomic and conditional on `expected_version`."""

    async def create(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any], workflow: WorkflowRecord,
                     events: list[tuple[str, Any]], search: dict[str, list[Any]] | None = None) -> bool:
        """Create the actor at version 1 (with the search attributes its on_create set); False (and no change) if it
        exists already."""
        ...

    async def exists(self, ref: ActorRef) -> bool: ...

    async def load(self, ref: ActorRef) -> ActorSnapshot | None: ...

    async def commit(self, ref: ActorRef, expected_version: int, draft: CommitDraft) -> int:
        """Store a commit; returns the new version. Raises VersionConflict if the version moved."""
        ...

    async def record_wake_error(self, ref: ActorRef, error: WakeError) -> None:
        """Remember why the last wake-up failed (shown by status until a later commit); replaces the
        previous one; does nothing if the actor does not exist."""
        ...

    async def delete(self, ref: ActorRef, *, at: float | None = None) -> bool:
        """Remove every item of the actor; True if it existed. Safe to re-run after an interruption; while
        it runs the actor loads as missing; afterwards a create starts it afresh.

        `at`: when, on the runtime's clock. The store keeps it (`deleted_at`, one small item that outlives the
        actor): a wake-up carrying a request made before it — a creation, a message — is dropped, never
        re-creates the actor or delivers the message to a later life (the delete wins, whatever the queues keep)."""
        ...

    async def deleted_at(self, ref: ActorRef) -> float | None:
        """When the actor was last deleted (`delete(ref, at=...)`), None if never."""
        ...

    # The checks every request path makes before its first write (no I/O; dormant.core.limits): a value the store
    # cannot hold is refused up front with ItemTooLargeError naming the limit, and nothing is stored or sent.
    def check_message(self, ref: ActorRef, message: InboxMessage) -> None:
        """Raise if `enqueue(ref, message)` could not store the message."""
        ...

    def check_creation(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any],
                       events: list[tuple[str, Any]]) -> None:
        """Raise if `create` could not store this actor's first version."""
        ...

    def check_commit(self, ref: ActorRef, version: int, draft: CommitDraft) -> None:
        """Raise if a commit of `draft` on `version` could not be stored. A store that has not read `version`
        may let it pass: `commit` checks again before it writes, and raises the same error then."""
        ...

    async def prepare_message(self, ref: ActorRef, message: InboxMessage) -> InboxMessage:
        """The message as this store keeps it and its wake-up carries it: values too big for an item written
        elsewhere first (the DynamoDB store's S3 bucket), references in their place. Call after check_message."""
        ...

    async def prepare_input(self, ref: ActorRef, value: Any) -> Any:
        """An actor's input as this store keeps it and a creating wake-up carries it (as prepare_message)."""
        ...
