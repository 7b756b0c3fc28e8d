"""Kept versions (dormant.runtime.versions: which versions a store keeps, and why): what a fork or a reset starts
from."""

from __future__ import annotations

from typing import Protocol

from dormant.core.records import ActorRef, ActorSnapshot, VersionInfo


class Versions(Protocol):
    async def retained_versions(self, ref: ActorRef) -> list[VersionInfo] | None:
        """The versions of the actor the store can still rebuild, oldest first (None: no such actor). Bounded:
        at most `snapshot_every` of them, the newest included."""
        ...

    async def load_version(self, ref: ActorRef, version: int) -> ActorSnapshot | None:
        """The actor as it was at `version`: meta, state, workflow record and live history (values kept elsewhere
        read back; the inbox and held ids empty). None: no such actor; VersionNotRetainedError (naming the kept
        range) for a version the store does not keep."""
        ...
