"""Values kept outside the items (dormant.s3.large_values; `dormant doctor`)."""

from __future__ import annotations

from typing import Protocol

from dormant.core.records import ActorRef
from dormant.models import ValueCheck


class Values(Protocol):
    async def check_values(self, ref: ActorRef, *, repair: bool = False) -> ValueCheck | None:
        """Every value the actor keeps outside its items (S3), checked: what is missing, and which kept versions are
        whole. With `repair`: a missing object is restored from another one with the same content; a pending
        message whose body is lost is taken out of the inbox; a lost value of the live version is replaced by a
        marker (the caller then marks the actor failed). None: no such actor. A store that keeps every value in its
        items reports them intact."""
        ...
