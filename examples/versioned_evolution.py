"""Versioned workflow evolution: v1 of this workflow validated with step "validate-v1" and ran
loop "main-loop"; v2 renames both. Dormant matches history in recorded order, so v2 first
retires v1's entries with `ctx.removed(name, kind)` (actors started on v1 skip them, new actors
ignore the calls), then runs "validate-v2" and "main-loop-v2". Without the `removed` calls an
old actor would stop as "diverged" with a diff instead of running mismatched code."""

from __future__ import annotations

from pydantic import BaseModel

from dormant import ActionContext, ActorDefinition, StepContext, WorkflowContext, actor, setup

ACTOR = "versioned-workflow"
IDLE = 0.5  # seconds between heartbeats


class VersionedState(BaseModel):
    runs: int = 0
    validated_by: list[str] = []
    heartbeats_v1: int = 0
    heartbeats_v2: int = 0


def get_state(c: ActionContext) -> VersionedState:
    return c.state


def define() -> ActorDefinition:
    definition = actor(ACTOR, state=VersionedState)
    definition.action(get_state)
    return definition


# -- v1: what older actors recorded ----------------------------------------------------------
def validate_v1(s: StepContext) -> None:
    s.state.runs += 1
    s.state.validated_by.append("v1")


async def main_loop_v1(loop: WorkflowContext) -> None:
    def heartbeat(s: StepContext) -> None:
        s.state.runs += 1
        s.state.heartbeats_v1 += 1

    await loop.sleep("idle", IDLE)
    await loop.step("heartbeat", heartbeat)


v1 = define()


@v1.workflow
async def run_v1(ctx: WorkflowContext) -> None:
    await ctx.step("validate-v1", validate_v1)
    await ctx.loop("main-loop", main_loop_v1)


registry_v1 = setup(v1)


# -- v2: the current code ----------------------------------------------------------------------
def validate_v2(s: StepContext) -> None:
    s.state.runs += 1
    s.state.validated_by.append("v2")


async def main_loop_v2(loop: WorkflowContext) -> None:
    def heartbeat(s: StepContext) -> None:
        s.state.runs += 1
        s.state.heartbeats_v2 += 1

    await loop.sleep("idle", IDLE)
    await loop.step("heartbeat-v2", heartbeat)


v2 = define()


@v2.workflow
async def run(ctx: WorkflowContext) -> None:
    # Retired in the order v1 recorded them.
    await ctx.removed("validate-v1", "step")
    await ctx.removed("main-loop", "loop")
    await ctx.step("validate-v2", validate_v2)
    await ctx.loop("main-loop-v2", main_loop_v2)


registry = setup(v2)
