"""Message ids that a re-run produces again: what makes sends from steps and actions idempotent."""

from __future__ import annotations

import uuid
from collections.abc import Callable

IdSource = Callable[[], str]
_ID_NAMESPACE = uuid.UUID("6f1c2a7e-2f0b-4d8e-9c59-1d3f0e8b7a10")


def deterministic_ids(seed: str) -> IdSource:
    """Message ids derived from `seed`: a re-run step or retried action re-sends the same ids,
    which receivers deduplicate."""
    counter = 0

    def next_id() -> str:
        nonlocal counter
        counter += 1
        return str(uuid.uuid5(_ID_NAMESPACE, f"{seed}#{counter}"))

    return next_id
