"""Lazy SQS queue attributes for moto: a send no longer counts every message of the queue.

moto's `Queue.attributes` builds every attribute of the queue, the three ApproximateNumberOfMessages* counts
included (each walks every message and reads the clock per message), and a FIFO SendMessage asks for it four
times just to read ContentBasedDeduplication. A backlog of n messages thus made each send O(n): the profile of
a loaded `dormant dev` showed half of moto's CPU there. Here `attributes` is a read-only mapping with the same
keys and values that computes a value only when it is read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any


class LazyAttributes(Mapping[str, Any]):
    """What moto's `Queue.attributes` returns, computed per key on access (values as moto renders them)."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        keys = list(queue.BASE_ATTRIBUTES)
        if queue.fifo_queue:
            keys += queue.FIFO_ATTRIBUTES
        if queue.kms_master_key_id:
            keys += queue.KMS_ATTRIBUTES
        self._keys = list(dict.fromkeys(keys))

    def __getitem__(self, key: str) -> Any:
        from moto.core.utils import camelcase_to_underscores

        if key not in self._keys:
            raise KeyError(key)
        queue = self._queue
        if key == "Policy" and queue.policy:
            value = queue.policy
        elif key == "RedrivePolicy" and queue.redrive_policy:
            value = json.dumps(queue.redrive_policy)
        else:
            value = getattr(queue, camelcase_to_underscores(key))
        return str(value).lower() if isinstance(value, bool) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def install() -> None:
    """Patch moto's Queue (idempotent)."""
    from moto.sqs.models import Queue

    if getattr(Queue, "_dormant_lazy_attributes", False):
        return
    Queue.attributes = property(LazyAttributes)  # type: ignore[assignment,method-assign]
    Queue._dormant_lazy_attributes = True  # type: ignore[attr-defined]
