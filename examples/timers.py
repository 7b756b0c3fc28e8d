"""Timers: a queue message is the trigger, a durable sleep the delay. Each reminder says when it is due;
the loop sleeps until then (`sleep_until` stores the absolute deadline, so the wait survives restarts and
costs nothing while the actor sleeps) and records it. A reminder already due fires at once.
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup


class Reminder(BaseModel):
    text: str
    at: AwareDatetime  # an ISO string with a zone, or epoch seconds


class ReminderState(BaseModel):
    fired: list[str] = Field(default_factory=list)


reminders = actor("reminder", state=ReminderState, queues={"reminders": queue(Reminder)})


@reminders.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-reminder")
        await loop.sleep_until("wait-until-reminder", message.body.at)

        def record(s: StepContext) -> None:
            s.state.fired.append(message.body.text)

        await loop.step("record-reminder", record)

    await ctx.loop("reminder-loop", iteration)


@reminders.action
def get_state(c: ActionContext) -> ReminderState:
    return c.state


registry = setup(reminders)
