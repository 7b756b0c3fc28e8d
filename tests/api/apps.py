"""Actors the API tests drive: queues with and without responses, actions with arguments, events from
steps, an input read by on_create, sleeps and retries for status, and a step that can hang (a worker
that dies between receiving a request and completing it)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from dormant import ActionContext, NonRetryableError, StepContext, WorkflowContext, actor, event, queue, setup
from dormant.actor import Registry
from examples.progress_broadcast import progress_actor
from examples.request_response import doubler
from tests.api.boundary_apps import breaker, counter, deep, finisher, notes


# -- account: two queues on one completable receive, actions, events, input ---------------------------
class AccountState(BaseModel):
    owner: str = ""
    balance: int = 0
    entries: list[int] = Field(default_factory=list)


class Deposit(BaseModel):
    amount: int = Field(gt=0)
    note: str | None = None


class Withdraw(BaseModel):
    amount: int = Field(gt=0)


class Receipt(BaseModel):
    ok: bool
    balance: int


class Changed(BaseModel):
    balance: int
    kind: Literal["deposit", "withdraw"]


account = actor("account", state=AccountState,
                queues={"deposit": queue(Deposit), "withdraw": queue(Withdraw, response=Receipt)},
                events={"changed": event(Changed)})


@account.on_create
def open_account(c: ActionContext) -> None:
    if isinstance(c.input, dict):
        c.state.owner = str(c.input.get("owner", ""))
        c.state.balance = int(c.input.get("opening", 0))


@account.workflow
async def run_account(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-command", names=["deposit", "withdraw"], completable=True)

        def apply(s: StepContext) -> dict[str, object]:
            amount = message.body.amount
            if message.name == "withdraw" and amount > s.state.balance:
                return {"ok": False, "balance": s.state.balance}
            s.state.balance += amount if message.name == "deposit" else -amount
            s.state.entries.append(amount if message.name == "deposit" else -amount)
            s.broadcast("changed", Changed(balance=s.state.balance, kind=message.name))  # type: ignore[arg-type]
            return {"ok": True, "balance": s.state.balance}

        receipt = await loop.step("apply", apply)
        assert message.complete is not None
        await message.complete(receipt if message.name == "withdraw" else None)

    await ctx.loop("account-loop", iteration)


@account.action
def get_state(c: ActionContext) -> AccountState:
    return c.state


@account.action
def add(c: ActionContext, amount: int, note: str = "") -> int:
    """Add to the balance directly (an action, not a message)."""
    c.state.balance += amount
    c.state.entries.append(amount)
    return c.state.balance


@account.action
def explode(c: ActionContext) -> None:
    raise ValueError("the action went wrong")


# -- sleeper: status shows a deadline, then a retry time, then a failure --------------------------------
class SleeperState(BaseModel):
    tries: int = 0


sleeper = actor("sleeper", state=SleeperState, queues={"go": queue(int)})


@sleeper.workflow
async def run_sleeper(ctx: WorkflowContext) -> None:
    await ctx.queue.next("wait-go")
    await ctx.sleep("nap", 3600)

    def flaky(s: StepContext) -> None:
        s.state.tries += 1
        raise RuntimeError(f"try {s.state.tries} failed")

    await ctx.step("flaky", flaky, max_retries=1, retry_backoff_base=60)


# -- plain: no workflow (the inspector reports it disabled) ---------------------------------------------
class Note(BaseModel):
    text: str = ""


plain = actor("plain", state=Note)


@plain.action
def write(c: ActionContext, text: str) -> Note:
    c.state.text = text
    return c.state


# -- hanger: a completable request whose work step can be made to hang (a worker about to die) ---------
@dataclass
class Gate:
    hang: bool = False
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    runs: int = 0


GATE = Gate()


class Job(BaseModel):
    value: int


class JobDone(BaseModel):
    result: int


class HangerState(BaseModel):
    received: int = 0


hanger = actor("hanger", state=HangerState, queues={"jobs": queue(Job, response=JobDone)})


@hanger.workflow
async def run_hanger(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-job", completable=True)

        def receipt(s: StepContext) -> None:
            s.state.received += 1

        await loop.step("receipt", receipt)

        async def work(s: StepContext) -> int:
            GATE.runs += 1
            if GATE.hang:
                GATE.entered.set()
                await asyncio.Event().wait()  # hangs until the worker is killed
            return int(message.body.value) * 10

        result = await loop.step("work", work)
        assert message.complete is not None
        await message.complete({"result": result})

    await ctx.loop("job-loop", iteration)


registry = setup(account, sleeper, plain, hanger, doubler, progress_actor, notes, finisher, breaker, deep, counter)


# -- desk: a send --wait that gets no answer (received without one, or the workflow fails) ---------------
def desk_registry() -> Registry:
    """"notes" are received without an answer; "orders" answer, unless their step fails the workflow."""
    a = actor("desk", state=AccountState,
              queues={"notes": queue(Deposit), "orders": queue(Withdraw, response=Receipt)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            note = await loop.queue.next("note", names=["notes"])
            await loop.step("keep", lambda s: s.state.entries.append(note.body.amount))
            order = await loop.queue.next("order", names=["orders"], completable=True)

            def charge(s: StepContext) -> dict[str, object]:
                if order.body.amount > 100:
                    raise NonRetryableError("too much")
                return {"ok": True, "balance": order.body.amount}

            receipt = await loop.step("charge", charge, max_retries=0)
            assert order.complete is not None
            await order.complete(receipt)

        await ctx.loop("desk", iteration)

    return setup(a)
