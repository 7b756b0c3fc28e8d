"""What an operator can do with an actor now, and the advice in words: the one rule that resume's refusals, the
status (ActorStatus `compensation`, `remedies`, `advice`: `dormant status`, the HTTP API) and the dashboard's buttons
follow (docs/operations.md, "What resume, terminate and delete do"). Pure: no I/O.

A failed workflow whose rollback handlers ran is *compensated*: its completed steps were undone, newest first, so a
resume (which retries the failed step) would build on steps that no longer stand: it is refused (NotResumableError).
What is left: reset it to a kept version (one from before the failure runs on from there), fork a kept version as a
new actor, terminate it, or delete it.
"""

from __future__ import annotations

from collections.abc import Sequence

from dormant.core.records import FINISHED
from dormant.models import Compensation, OperatorAction
from dormant.workflow.history import EntryKind, HistoryEntry, WorkflowRecord, WorkflowState

_ALWAYS: tuple[OperatorAction, ...] = ("fork", "reset", "delete")  # (a version is kept while the actor exists)


def compensation(history: Sequence[HistoryEntry], record: WorkflowRecord) -> Compensation | None:
    """The rollback a failed (or compensating) workflow ran: the steps undone in the order their handlers ran (newest
    step first, as the engine runs them: dormant.workflow.rollback), and those whose handler failed (retried);
    None when no rollback handler ran."""
    steps = sorted((e for e in history if e.kind is EntryKind.STEP and (e.rollback_done or e.rollback_error)),
                   key=lambda e: e.seq, reverse=True)
    if not steps and record.rollback_attempts == 0:
        return None
    return Compensation(undone=[e.location for e in steps if e.rollback_done],
                        failed=[e.location for e in steps if e.rollback_error is not None and not e.rollback_done])


def remedies(record: WorkflowRecord, compensated: Compensation | None, *, workflow: bool = True
             ) -> list[OperatorAction]:
    """The operator actions that apply to an actor in this state (each refused one left out)."""
    state = record.state
    if state in FINISHED:
        return list(_ALWAYS)
    if state is WorkflowState.PAUSED:
        return ["unpause", "terminate", *_ALWAYS]
    resumable = workflow and not (state is WorkflowState.FAILED and compensated is not None)
    return [*(("resume",) if resumable else ()), "pause", "terminate", *_ALWAYS]


def advice(record: WorkflowRecord, compensated: Compensation | None) -> str | None:
    """What the operator should do next, in words (None: nothing needs them)."""
    state = record.state
    if state is WorkflowState.FAILED and compensated is not None:
        return ("failed and was compensated: its rollback handlers undid the steps it had completed, so resume is "
                "refused (a retry would build on undone steps). Reset it to a kept version, fork a kept version "
                "as a new actor, or delete it")
    if state is WorkflowState.FAILED:
        return "fix the cause, then resume it: the failed step runs again with a fresh attempt count"
    if state is WorkflowState.DIVERGED:
        return "deploy code that matches its history, then resume it: its waiting messages run then"
    if state is WorkflowState.ROLLING_BACK and compensated is not None and compensated.failed:
        return "a rollback handler failed: it is retried (fix its cause; the rollback goes on by itself)"
    return None
