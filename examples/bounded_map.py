"""Bounded map (a quorum write): each `writes` message stores a document on the cluster's five replicas with
`ctx.map`, at most two writes in flight at once (what each replica's client pool allows), and the write is done
as soon as three replicas have acknowledged it (a majority): the write still in flight then is cancelled and the
remaining replica is never asked. Two failed replicas abort the write at once (a degraded cluster: better to
report it than to keep writing), although the three others might still have answered. Each replica's write is a
retried step in its own item, so a crash replays the acknowledged writes and repeats only the others."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, MapError, StepContext, WorkflowContext, actor, queue, setup

REPLICAS = ["replica-1", "replica-2", "replica-3", "replica-4", "replica-5"]
IN_FLIGHT = 2  # writes in flight at once
QUORUM = 3  # acknowledgements that make a write durable
TOLERATED = 1  # failed replicas a write survives


async def _write_replica(replica: str, key: str, value: str) -> str:
    return f"{replica}:{key}"


@dataclass
class Services:
    """The replicas' storage API (injected; tests replace it)."""

    write_replica: Callable[[str, str, str], Awaitable[str]] = _write_replica


services = Services()


class Document(BaseModel):
    key: str
    value: str


class QuorumState(BaseModel):
    acknowledged: dict[str, list[str]] = {}  # document key -> the replicas that acknowledged its last write
    failed: dict[str, str] = {}  # document key -> why its last write failed


quorum = actor("quorum-write", state=QuorumState, queues={"writes": queue(Document)})


@quorum.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        document = (await loop.queue.next("wait-write")).body

        async def write(item: WorkflowContext, replica: str) -> str:
            return str(await item.step("write", lambda _s: services.write_replica(replica, document.key,
                                                                                  document.value),
                                       max_retries=1, retry_backoff_base=0.5))

        try:
            written = await loop.map("replicate", REPLICAS, write, max_concurrency=IN_FLIGHT, min_successes=QUORUM,
                                     tolerated_failures=TOLERATED)
        except MapError as failure:
            reason = failure.reason

            def record_failure(s: StepContext) -> None:
                s.state.failed[document.key] = reason
                s.state.acknowledged.pop(document.key, None)

            await loop.step("record-failure", record_failure)
            return
        replicas = [outcome.item for outcome in written.succeeded]

        def record_quorum(s: StepContext) -> None:
            s.state.acknowledged[document.key] = replicas
            s.state.failed.pop(document.key, None)

        await loop.step("record-quorum", record_quorum)

    await ctx.loop("write-loop", iteration)


@quorum.action
def get_state(c: ActionContext) -> QuorumState:
    return c.state


registry = setup(quorum)
