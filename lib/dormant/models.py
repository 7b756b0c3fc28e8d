"""Results the client API returns (the same over HTTP and in-process)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from dormant.workflow.history import DivergenceInfo, WorkflowState


class SendResult(BaseModel):
    """What a send did. Without `wait`: "queued". With `wait`: "completed" (the workflow's `complete()`
    answer is `response`), "received" (the workflow took the message with a receive that does not answer, or
    finished the loop iteration that took it without answering: no response will come), "received" or
    "queued" with `workflow` set (the workflow has stopped or ended after taking the message, or before) or
    "timedOut" (none of these within the timeout; the message is stored and may still be answered)."""

    status: Literal["queued", "received", "completed", "timedOut"]
    id: str
    response: Any = None
    workflow: WorkflowState | None = None
    """Set when no answer comes because of the workflow's state: failed, diverged or rolling_back (the
    message, stored, runs only after an operator resumes the actor) or completed, terminated (it never runs).
    A send to a failed or diverged actor says so at once, with or without `wait`."""


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
