"""Queue-driven worker: external systems enqueue jobs and the actor processes each one durably. The loop
asks for the next job with `next_batch(timeout=30)`, which returns an empty list when no job arrived in
time; the iteration then just ends and the loop waits again (a place for periodic housekeeping).
"""

from __future__ import annotations

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

IDLE_TIMEOUT = 30.0  # seconds


class Job(BaseModel):
    id: str
    amount: int


class WorkerState(BaseModel):
    processed: int = 0
    total_amount: int = 0


queue_worker = actor("queue-worker", state=WorkerState, queues={"jobs": queue(Job)})


@queue_worker.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        batch = await loop.queue.next_batch("wait-job", timeout=IDLE_TIMEOUT)
        if not batch:
            return  # timed out: next iteration
        job = batch[0].body

        def process_job(s: StepContext) -> None:
            s.state.processed += 1
            s.state.total_amount += job.amount

        await loop.step("process-job", process_job)

    await ctx.loop("worker-loop", iteration)


@queue_worker.action
def get_state(c: ActionContext) -> WorkerState:
    return c.state


registry = setup(queue_worker)
