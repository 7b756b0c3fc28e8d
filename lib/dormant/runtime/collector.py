"""The garbage collector during a wake-up (measured in benchmarks/engine.py, docs/performance.md).

A wake-up allocates a few objects per step that reference counting frees at once (the engine keeps its
per-step objects free of reference cycles); what stays alive is the actor's history. CPython's default
young-generation threshold (700 allocations) then runs a collection every ~100 steps that only re-scans
that live history, and every tenth of those also scans the older generation. Raising the threshold for
the wake-up's duration removes most of that work; it bounds the cyclic garbage that can wait for a
collection to YOUNG_THRESHOLD objects. The previous setting is restored afterwards, and a threshold
someone set higher already is left alone.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 10_000


@contextmanager
def relaxed_collector() -> Iterator[None]:
    young, *older = gc.get_threshold()
    if young == 0 or young >= YOUNG_THRESHOLD:  # 0: automatic collection is off; higher: someone's choice
        yield
        return
    gc.set_threshold(YOUNG_THRESHOLD, *older)
    try:
        yield
    finally:
        gc.set_threshold(young, *older)
