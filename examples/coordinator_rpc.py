"""Coordinator -> worker RPC: a coordinator's workflow takes tasks from its queue and, inside a
step, calls an action on the worker actor named by the task (created on first use). The
action's result is recorded by the step, so a replay never calls the worker again."""

from __future__ import annotations

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup


class WorkerState(BaseModel):
    tasks_run: int = 0


worker = actor("worker", state=WorkerState)


@worker.action
def run_task(c: ActionContext, value: int) -> int:
    c.state.tasks_run += 1
    return value * 2


@worker.action(name="get_state")
def get_worker_state(c: ActionContext) -> WorkerState:
    return c.state


class CoordinatorState(BaseModel):
    last_task_id: str | None = None
    last_result: int = 0


class Task(BaseModel):
    task_id: str
    worker_id: str
    value: int


coordinator = actor("coordinator", state=CoordinatorState, queues={"tasks": queue(Task)})


@coordinator.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        batch = await loop.queue.next_batch("wait-task", timeout=30)
        if not batch:
            return
        task: Task = batch[0].body

        async def dispatch(s: StepContext) -> int:
            return await s.client().get_or_create("worker", [task.worker_id]).call("run_task", task.value)

        result = await loop.step("dispatch-rpc", dispatch)

        def record(s: StepContext) -> None:
            s.state.last_task_id = task.task_id
            s.state.last_result = result

        await loop.step("record-result", record)

    await ctx.loop("orchestrator-loop", iteration)


@coordinator.action
def get_state(c: ActionContext) -> CoordinatorState:
    return c.state


registry = setup(coordinator, worker)
