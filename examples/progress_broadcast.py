"""Store workflow progress in state + broadcast: progress lives in the actor's state (so recovery and
replay always restore it) and every change is broadcast as a `progress_updated` event so clients can
render it live. A broadcast belongs to its step: it is published with the step's commit, in order, and
never again when the step is replayed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from dormant import ActionContext, StepContext, WorkflowContext, actor, event, queue, setup


class Progress(BaseModel):
    stage: Literal["idle", "running", "completed"] = "idle"
    completed: int = 0
    total: int = 0


class Job(BaseModel):
    value: int


class ProgressState(BaseModel):
    progress: Progress = Field(default_factory=Progress)
    sum: int = 0


progress_actor = actor("progress", state=ProgressState, queues={"jobs": queue(Job)},
                       events={"progress_updated": event(Progress)})


def mark_running(s: StepContext) -> None:
    current = s.state.progress
    s.state.progress = Progress(stage="running", completed=current.completed, total=current.total + 1)
    s.broadcast("progress_updated", s.state.progress)


@progress_actor.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-job")
        await loop.step("mark-running", mark_running)

        def apply_job(s: StepContext) -> None:
            current = s.state.progress
            s.state.sum += message.body.value
            s.state.progress = Progress(stage="completed", completed=current.completed + 1, total=current.total)
            s.broadcast("progress_updated", s.state.progress)

        await loop.step("apply-job", apply_job)

    await ctx.loop("progress-loop", iteration)


@progress_actor.action
def get_state(c: ActionContext) -> ProgressState:
    return c.state


registry = setup(progress_actor)
