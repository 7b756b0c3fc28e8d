"""Results the client API returns (the same over HTTP and in-process)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from dormant.workflow.history import DivergenceInfo, WorkflowState


class SendResult(BaseModel):
    status: Literal["queued", "completed", "timedOut"]
    id: str
    response: Any = None
    workflow: WorkflowState | None = None
    """Set when the actor's workflow has failed or diverged: the message is stored and runs only after an
    operator resumes the actor (a `wait` returns at once)."""


class WaitingFor(BaseModel):
    queues: list[str] = Field(default_factory=list)
    deadline: float | None = None
    retry_at: float | None = None


class ActorStatus(BaseModel):
    workflow: WorkflowState
    error: str | None = None
    waiting_for: WaitingFor = Field(default_factory=WaitingFor)
    divergence: DivergenceInfo | None = None
    output: Any = None
    version: int = 0
