"""Callbacks (dormant.workflow.callbacks): a commit's `draft.callbacks` open and close lookup records, written with
the commit (the DynamoDB store writes them right after its commit item, and again on a load of that version if it
crashed in between). Which changes of a record are allowed is dormant.core.callbacks's rule: a record never goes
back, and a heartbeat's move is never undone by a re-written commit."""

from __future__ import annotations

from typing import Protocol

from dormant.core.callbacks import CallbackRecord


class Callbacks(Protocol):
    async def read_callback(self, token_hash: str) -> CallbackRecord | None:
        """The lookup record of the callback whose token hashes to `token_hash` (one read; None if unknown). It
        may be past `expires_at`: the caller says what that means."""
        ...

    async def heartbeat_callback(self, token_hash: str, heartbeat_deadline: float, now: float) -> bool:
        """Move an open callback's heartbeat deadline forward to `heartbeat_deadline` (one conditional write,
        nothing else: the actor is not woken). False, changing nothing, when the record is gone, closed, or its
        heartbeat deadline passed before `now`."""
        ...
