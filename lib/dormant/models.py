"""Results the client API returns (the same over HTTP and in-process)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from dormant.workflow.history import DivergenceInfo, WorkflowState


class SendResult(BaseModel):
    status: Literal["queued", "completed", "timedOut"]
    id: str
    response: Any = None


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


class OperationResult(BaseModel):
    """What an operator action (resume, terminate, delete) did to one actor."""

    actor: str
    key: list[str]
    operation: Literal["resume", "terminate", "delete"]
    outcome: Literal["resumed", "retrying", "woken", "terminated", "deleted", "unchanged", "not_found", "refused"]
    status: WorkflowState | None = Field(None, description="The workflow's status before the action")
    message: str


class OperationPage(BaseModel):
    """The results of one page of a bulk action, and the cursor of the next page (null: done)."""

    results: list[OperationResult]
    cursor: str | None = None
