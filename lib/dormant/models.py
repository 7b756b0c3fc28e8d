"""Results the client API returns (the same over HTTP and in-process)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from dormant.workflow.history import DivergenceInfo, HistoryEntry, OperatorNote, WorkflowRecord, WorkflowState


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


class WaitingCallback(BaseModel):
    """An open callback (`ctx.callback`): an outside system may complete it. Its token is never shown here."""

    name: str
    location: str
    deadline: float | None = Field(None, description="When it times out (epoch seconds); null: never")
    heartbeat_deadline: float | None = Field(None, description="When it times out unless a heartbeat comes first")


class WaitingFor(BaseModel):
    queues: list[str] = Field(default_factory=list)
    deadline: float | None = None
    retry_at: float | None = None
    limits: list[str] = Field(default_factory=list, description="Flow-control limits (setup(limits=...)) a step "
                              "waits for a slot of; `deadline` is then its next try (a release wakes it sooner)")
    callbacks: list[WaitingCallback] = Field(default_factory=list)


CallbackStatusName = Literal["accepted", "open", "completed", "failed", "timed_out", "cancelled", "expired"]


class CallbackStatus(BaseModel):
    """What a callback request did, or where a callback stands (`GET /callbacks/{token}`).

    `accepted`: this completion is stored for the workflow (its wake-up is on its way); `open`: waiting (a
    heartbeat answers this); `completed` / `failed`: the workflow took a completion (a retry of the same one
    answers this); `timed_out`, `cancelled`: over without one; `expired`: past its deadline, not yet recorded."""

    status: CallbackStatusName
    callback: str = Field(description="The callback's name (as declared on the actor)")
    deadline: float | None = None
    heartbeat_deadline: float | None = None


class Approval(BaseModel):
    """The result of an approval callback (`callback(Approval)`, `cb.approval_url`): what the person who followed
    the link chose on its confirmation page (approve: True, reject: False)."""

    approved: bool


OperatorAction = Literal["resume", "pause", "unpause", "terminate", "fork", "reset", "delete"]


class Compensation(BaseModel):
    """The rollback a failed workflow ran (dormant.runtime.remedies)."""

    undone: list[str] = Field(description="The steps whose rollback handlers ran, by location, in the order they ran "
                                          "(newest step first)")
    failed: list[str] = Field(default_factory=list, description="The steps whose rollback handler failed (it is "
                                                                "retried)")


class ActorStatus(BaseModel):
    workflow: WorkflowState
    error: str | None = None
    waiting_for: WaitingFor = Field(default_factory=WaitingFor)
    divergence: DivergenceInfo | None = None
    output: Any = None
    version: int = 0
    search: dict[str, Any] = Field(default_factory=dict, description="Its search attributes (datetimes as ISO 8601)")
    paused: OperatorNote | None = Field(None, description="While paused: who paused it, why, when, and the state "
                                                          "unpause restores")
    rewritten: OperatorNote | None = Field(None, description="The last reset of its history, or the fork that "
                                                             "created it: who, why, when, from which version")
    compensation: Compensation | None = Field(None, description="When its rollback handlers ran: which steps were "
                                                               "undone, in what order")
    remedies: list[OperatorAction] = Field(default_factory=list, description="The operator actions that apply now "
                                                                             "(a refused one is left out)")
    advice: str | None = Field(None, description="What an operator should do next, in words (null: nothing)")


class OperationResult(BaseModel):
    """What an operator action (resume, terminate, delete) did to one actor."""

    actor: str
    key: list[str]
    operation: Literal["resume", "terminate", "delete", "fire_timer", "pause", "unpause", "fork", "reset"]
    outcome: Literal["resumed", "retrying", "woken", "terminated", "deleted", "unchanged", "not_found", "refused",
                     "fired", "paused", "unpaused", "forked", "reset"]
    status: WorkflowState | None = Field(None, description="The workflow's status before the action")
    message: str


class OperationPage(BaseModel):
    """The results of one page of a bulk action, and the cursor of the next page (null: done)."""

    results: list[OperationResult]
    cursor: str | None = None


class StatusCount(BaseModel):
    count: int = Field(description="Actors counted (at most the limit asked for)")
    exact: bool = Field(description="False when there are more than `count` (counting stopped at the limit)")


class ActorCounts(BaseModel):
    """How many actors of one type are listed in each status."""

    actor: str
    counts: dict[str, StatusCount] = Field(description="Per listed status (`running` is never listed)")


AttentionKind = Literal["failed", "diverged", "rolling_back", "retrying", "wake_error"]


class AttentionActor(BaseModel):
    """An actor that needs an operator, or may soon: failed, diverged, compensating, retrying a step, or whose last
    wake-up failed."""

    name: str
    key: list[str]
    reason: AttentionKind
    status: WorkflowState
    since: float = Field(description="When it entered this status, or was marked (epoch seconds)")
    detail: str | None = Field(None, description="The error or the retry, where the list knows it (retrying and "
                                                 "wake errors; a status read gives the rest)")


class AttentionList(BaseModel):
    actors: list[AttentionActor] = Field(description="Failed first, then diverged, rolling back, retrying and "
                                                     "wake errors")
    truncated: bool = Field(description="True when a group had more actors than `limit` (list them by status)")


class PendingMessage(BaseModel):
    """A message waiting in an actor's inbox: a queue message, or an action scheduled for later."""

    id: str
    kind: Literal["queue", "action", "callback"]
    queue: str = Field(description="The queue, the scheduled action's name, or the callback's (a completion)")
    created_at: float
    not_before: float | None = Field(None, description="A scheduled action's due time")
    sender: str | None = Field(None, description="Who sent it, as `kind:id`")
    bytes: int = Field(description="Size of its body (or arguments) as JSON")
    preview: str = Field(description="The body (or arguments) as JSON, cut to the preview length")
    truncated: bool = Field(description="True when `preview` is cut")


class Inbox(BaseModel):
    messages: list[PendingMessage] = Field(description="In send order, at most `limit`")
    total: int = Field(description="Messages waiting in all")


class KeptVersion(BaseModel):
    """An actor as it was at a version its store still keeps (what a fork or reset would start from)."""

    version: int
    state: dict[str, Any]
    workflow: WorkflowRecord
    history: list[HistoryEntry] = Field(description="Its live history then, in recorded order")


class StoredValueProblem(BaseModel):
    """A value an actor's items refer to in S3 whose object is not there (issue 26), and what became of it."""

    where: str = Field(description="What refers to it: `version N: the state`, `version N: history entry 'x/y'`, "
                                   "`inbox message <id>` ...")
    object: str = Field(description="The S3 object key the reference names")
    outcome: Literal["missing", "recovered", "lost"] = Field(
        description="`missing`: found by a check; `recovered`: restored from another object with the same content "
                    "(exact: keys name their content's SHA-256); `lost`: no copy exists")


class ValueCheck(BaseModel):
    """What `dormant doctor` found (and, with --repair, did) for one actor: every value it keeps outside its items
    checked against the bucket (docs/operations.md, "Lost values")."""

    actor: str
    key: list[str]
    outcome: Literal["intact", "repaired", "lost", "not_found"] = Field(
        description="`intact`: every reference resolves; `repaired`: every missing object was recovered by its "
                    "content; `lost`: some value has no copy (see `problems`)")
    references: int = Field(description="References checked (items, and objects that name parts)")
    problems: list[StoredValueProblem] = Field(default_factory=list)
    intact_versions: list[int] = Field(default_factory=list, description="Kept versions whose every value is there "
                                                                           "(a reset or fork can start from them)")
    dropped_messages: list[str] = Field(default_factory=list, description="Inbox messages whose body was lost and "
                                                                            "that a repair took out of the inbox")
    marked_failed: bool = Field(False, description="A repair found values of the live version lost: it put a "
                                                   "marker in their place and marked the actor failed")
    message: str
