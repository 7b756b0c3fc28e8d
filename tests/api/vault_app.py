"""An actor guarded by an authorization hook, for the identity and authorization tests (in-process, over
HTTP, through the Lambda handler in each auth mode).

`vault` is keyed by its owner: the owner may do anything to it; an admin (a JWT with the `vault/admin`
scope, the dev user `admin`, or the IAM role `.../vault-admin`) may also read its status; other actors of the
application may send and call; everyone else is refused. The workflow records who sent each deposit, and the
`whoami` action returns `c.caller`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from dormant import AccessRequest, ActionContext, Caller, StepContext, WorkflowContext, actor, event, queue, setup


class VaultState(BaseModel):
    balance: int = 0
    senders: list[str] = Field(default_factory=list)  # "kind:id" of each deposit's sender, in order
    created_by: str | None = None


class Deposit(BaseModel):
    amount: int = Field(gt=0)


class Changed(BaseModel):
    balance: int


vault = actor("vault", state=VaultState, queues={"deposit": queue(Deposit)}, events={"changed": event(Changed)})
ASKED: list[AccessRequest] = []  # every request the hook saw (tests clear it)


def is_admin(caller: Caller) -> bool:
    return (caller.has_scope("vault/admin") or (caller.kind == "dev" and caller.id == "admin")
            or (caller.kind == "iam" and caller.id.endswith(":assumed-role/vault-admin/ops")))


@vault.authorize
def may(request: AccessRequest) -> bool:
    ASKED.append(request)
    caller = request.caller
    if caller.kind == "actor":
        return request.operation in ("send", "call")
    if request.operation == "status":
        return is_admin(caller)
    owner = request.key[0]
    return caller.id == owner or caller.claim("email") == owner


@vault.on_create
def opened(c: ActionContext) -> None:
    c.state.created_by = None if c.caller is None else str(c.caller)


@vault.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-deposit")
        sender = "unknown" if message.sender is None else str(message.sender)

        def apply(s: StepContext) -> None:
            s.state.balance += message.body.amount
            s.state.senders.append(sender)
            s.broadcast("changed", {"balance": s.state.balance})

        await loop.step("apply", apply)

    await ctx.loop("vault-loop", iteration)


@vault.action
def whoami(c: ActionContext) -> dict[str, Any] | None:
    return None if c.caller is None else c.caller.model_dump(mode="json")


@vault.action
def balance(c: ActionContext) -> int:
    return int(c.state.balance)


# -- a teller actor that deposits into a vault from a step (its caller is the teller itself) -----------------
class Transfer(BaseModel):
    vault: str
    amount: int


teller = actor("teller", queues={"transfer": queue(Transfer)})


@teller.workflow
async def run_teller(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-transfer")

        async def deposit(s: StepContext) -> None:
            await s.client().get_or_create("vault", [message.body.vault]).send("deposit",
                                                                                {"amount": message.body.amount})

        await loop.step("deposit", deposit)

    await ctx.loop("teller-loop", iteration)


registry = setup(vault, teller)
