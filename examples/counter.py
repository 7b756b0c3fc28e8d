"""Loops: the recommended workflow shape. One durable loop waits for the next queued command and applies
it in a step, so every change to the actor's state goes through one ordered, replayable path. Finished
iterations are compacted, so a wake-up replays only the current one however many commands came before.
"""

from __future__ import annotations

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup


class CounterState(BaseModel):
    value: int = 0
    processed: int = 0


class Delta(BaseModel):
    delta: int


counter = actor("workflow-counter", state=CounterState,
                queues={"counter": queue(Delta)})


@counter.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-counter-command")

        def apply(s: StepContext) -> None:
            s.state.value += message.body.delta
            s.state.processed += 1
        await loop.step("apply-counter-command", apply)
    await ctx.loop("counter-loop", iteration)


@counter.action
def get_state(c: ActionContext) -> CounterState:
    state: CounterState = c.state
    return state


registry = setup(counter)
