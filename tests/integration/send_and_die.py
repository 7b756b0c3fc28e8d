"""`python -m tests.integration.send_and_die SETTINGS_JSON ACTOR KEY MESSAGE_ID`: send one counter message
through the AWS ActorService and kill -9 this process at its first storage write after the wake-up went to
SQS (the inbox write, or the actor's creation for a new actor): the gap between the two storage calls."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from dormant.aws.service import open_aws_service
from dormant.ports import EventStore
from dormant.settings import Settings
from examples.counter import registry


class DieOnWrite:
    """The store, killing the process (SIGKILL: no cleanup, no flush) at `create` or `enqueue`."""

    def __init__(self, inner: EventStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if name not in ("create", "enqueue"):
            return attribute

        async def die(*args: Any, **kwargs: Any) -> Any:
            sys.stdout.write(f"killed at {name}\n")
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

        return die


async def main(settings: Settings, actor: str, key: str, message_id: str) -> None:
    async with open_aws_service(registry, settings) as service:
        service.store = DieOnWrite(service.store)  # type: ignore[assignment]
        await service.send(service.ref(actor, [key]), "counter", {"delta": 1}, message_id=message_id)
    raise SystemExit("the send finished: the kill did not happen")


if __name__ == "__main__":
    asyncio.run(main(Settings.model_validate_json(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]))
