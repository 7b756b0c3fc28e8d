"""What an actor's commits answer and broadcast: responses to completable messages, and events."""

from __future__ import annotations

from typing import Any, Protocol

from dormant.core.records import ActorRef, EventRecord


class Outputs(Protocol):
    async def wait_response(self, ref: ActorRef, message_id: str, timeout: float) -> tuple[bool, Any]:
        """(True, response) once a completable message is answered, (False, None) after `timeout`."""
        ...

    async def read_events(self, ref: ActorRef, after: int, limit: int) -> list[EventRecord]: ...

    async def wait_events(self, ref: ActorRef, after: int, timeout: float) -> list[EventRecord]:
        """Events after `after`, waiting up to `timeout` seconds for the first one."""
        ...
