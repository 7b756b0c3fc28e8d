"""The in-memory backend, the reference every other backend is held to (tests/contract): the event store, the
flow-control slots, the transport and fault injection. TestEnv, `dormant replay` and offline checks run on it.

    from dormant.memory import MemoryEventStore
"""

from dormant.memory.store import InjectedFault, MemoryEventStore

__all__ = ["InjectedFault", "MemoryEventStore"]
