"""The dashboard's timer and form tests: a trip is booked by a message (checked against its schema), reserves its
flight and hotel in a join, then waits a day for a confirmation before it gives up."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from dormant import ActionContext, QueueTimeoutError, StepContext, WorkflowContext, actor, queue, setup

DAY = 24 * 3600.0


class Booking(BaseModel):
    traveller: str = Field(min_length=1)
    nights: int = Field(ge=1)


class Confirmation(BaseModel):
    ok: bool = True


class Trip(BaseModel):
    traveller: str = ""
    reserved: dict[str, str] = Field(default_factory=dict)
    outcome: str = ""


trip = actor("trip", state=Trip, queues={"book": queue(Booking), "confirm": queue(Confirmation)})


@trip.workflow
async def run(ctx: WorkflowContext) -> str:
    booking = (await ctx.queue.next("wait-booking", names=["book"])).body

    def reserve(what: str) -> Any:
        async def branch(b: WorkflowContext) -> str:
            def book(s: StepContext) -> str:
                s.state.traveller = booking.traveller
                s.state.reserved[what] = f"{what}-{booking.nights}n"
                return str(s.state.reserved[what])

            return str(await b.step(f"book-{what}", book))

        return branch

    await ctx.join("reserve", {"flight": reserve("flight"), "hotel": reserve("hotel")})
    try:
        await ctx.queue.next("wait-confirmation", names=["confirm"], timeout=DAY)
        outcome = "confirmed"
    except QueueTimeoutError:
        outcome = "cancelled: no confirmation within a day"

    def finish(s: StepContext) -> str:
        s.state.outcome = outcome
        return outcome

    return str(await ctx.step("finish", finish))


@trip.action
def summary(c: ActionContext, prefix: str = "trip") -> str:
    return f"{prefix} of {c.state.traveller or 'nobody'}: {c.state.outcome or 'open'}"


registry = setup(trip)
