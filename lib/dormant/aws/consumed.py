"""Wake-up messages whose work is already done, recognised without a read.

Every send leaves a wake-up message carrying its message (dormant.sqs.transport), so a burst of N sends to
one actor leaves N wake-ups, while the first wake-up to load the actor consumes all N messages. The other N-1
would each load the actor (two Queries) and replay it to find nothing to do; behind them in the FIFO queue,
a request to another actor waited out the whole backlog (2,000 sends over 50 actors kept a request/response
waiting about 40 s in `dormant dev`).

The worker remembers which message ids its wake-ups saw consumed (held by the actor, no longer pending, at their
load) or consumed themselves, each with a time by which it was (that load's start, or the consuming commit's: a
wake-up also consumes messages that arrive while it runs). A wake-up message then needs no wake-up when it is a
first delivery (a redelivery may stand for a wake-up that died before its timer went out: those always run),
carries a queue message (and perhaps the creation of its actor: the actor that consumed the message exists, or
did), is no timer, and that message's id was consumed by the same actor after the message was created (so the
consumed message is this one, not a later re-send of its id, e.g. to a re-created actor). Anything else runs as
before: a worker that has not woken the actor since (another Lambda container, or a restarted `dormant dev`) runs
the first such wake-up, and learns from its load what the others need not do. Skipping one is what the normal path
comes to, less a load and a replay: the actor holds the id, so nothing would be stored, and its own timers still
wake it for anything else that is due.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from dormant.sqs.transport import WakeMessage

DEFAULT_LIMIT = 20_000  # remembered ids per worker process (a few MB at most)


class ConsumedMessages:
    """A bounded memory of (actor id, message id) -> a time by which the actor had consumed that message."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._consumed_by: OrderedDict[tuple[str, str], float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._consumed_by)

    def add(self, actor_id: str, consumed: Mapping[str, float]) -> None:
        """`consumed`: message id -> a time by which it was consumed (the later of two is as true, and tighter)."""
        for message_id, at in consumed.items():
            key = (actor_id, message_id)
            self._consumed_by[key] = max(at, self._consumed_by.get(key, at))
            self._consumed_by.move_to_end(key)
        while len(self._consumed_by) > self.limit:
            self._consumed_by.popitem(last=False)

    def done(self, actor_id: str, wake: WakeMessage) -> bool:
        """Whether this wake-up message's only purpose, its queue message, was consumed after it was sent."""
        message = wake.message
        if message is None or wake.due is not None or message.kind != "queue":
            return False
        consumed_by = self._consumed_by.get((actor_id, message.id))
        return consumed_by is not None and message.created_at < consumed_by
