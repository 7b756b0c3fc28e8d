"""Race: first winner takes all. An auction (one actor per item) is listed, then races a `bids` message
against a 24-hour durable sleep; whichever finishes first is recorded as the winner and the other branch
is cancelled. The outcome is finalized in a step: "sold" with the winning amount, or "expired".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

AUCTION_SECONDS = 24 * 3600


class Bid(BaseModel):
    amount: int = Field(gt=0)


class AuctionState(BaseModel):
    result: Literal["sold", "expired"] | None = None
    winning_bid: int | None = None


async def _list_item(item_id: str) -> None:
    return None


async def _finalize_auction(item_id: str, outcome: str) -> None:
    return None


@dataclass
class Services:
    """The auction house API (HTTP in the original); tests replace it with fakes."""

    list_item: Callable[[str], Awaitable[None]] = _list_item
    finalize_auction: Callable[[str, str], Awaitable[None]] = _finalize_auction


services = Services()

auction = actor("auction", state=AuctionState, queues={"bids": queue(Bid)})


@auction.workflow
async def run(ctx: WorkflowContext) -> str:
    await ctx.step("list-item", lambda s: services.list_item(s.key[0]))

    async def bid(branch: WorkflowContext) -> int:
        message = await branch.queue.next("wait-bid")
        return message.body.amount

    async def expire(branch: WorkflowContext) -> int:
        await branch.sleep("auction-timeout", AUCTION_SECONDS)
        return 0

    outcome = await ctx.race("bid-or-expire", {"bid": bid, "expire": expire})

    async def finalize(s: StepContext) -> str:
        result = "sold" if outcome.winner == "bid" else "expired"
        await services.finalize_auction(s.key[0], result)
        s.state.result = result
        s.state.winning_bid = outcome.value if outcome.winner == "bid" else None
        return result

    return await ctx.step("finalize", finalize)


@auction.action
def get_state(c: ActionContext) -> AuctionState:
    return c.state


registry = setup(auction)
