"""The record that marks an actor failed, small enough to fit in any history (dormant.core.limits.RECORD_ROOM: every
ordinary commit leaves this room free), shared by the wake-up's fallback and `dormant doctor`."""

from __future__ import annotations

from dormant.core.limits import FAILURE_TEXT, RECORD_ROOM, cut_text, json_bytes, utf8_size
from dormant.workflow.history import ErrorInfo, WorkflowRecord, WorkflowState

CUT_NOTE = " [... cut: the whole text is in the worker's log]"
MAX_TYPE_NAME = 128  # bytes of the error's type name kept


def failure_mark(record: WorkflowRecord, error: BaseException) -> WorkflowRecord:
    """`record` marked failed with `error`, at most RECORD_ROOM bytes as stored JSON (dormant.core.limits), so that the
    commit that stores it fits whatever the history's size: nothing it waited for is kept, the error's text is cut
    to FAILURE_TEXT (and shorter if the operator notes on the record leave less room), and those notes are dropped
    only if even the error's type alone would not fit beside them."""
    kind = cut_text(type(error).__name__, MAX_TYPE_NAME, "")
    failed = record.model_copy(update={
        "state": WorkflowState.FAILED, "output": None, "divergence": None, "waiting_for": [], "deadline": None,
        "retry_at": None, "limits": [], "error": ErrorInfo(type=kind, message="")})
    if json_bytes(failed.model_dump(mode="json")) > RECORD_ROOM.maximum:
        failed = failed.model_copy(update={"paused": None, "rewritten": None})
    room = min(FAILURE_TEXT.maximum, RECORD_ROOM.maximum - json_bytes(failed.model_dump(mode="json")))
    # The room is counted in bytes of JSON: a character escaped in JSON (a quote, a newline) takes up to 6.
    text = cut_text(str(error), room, CUT_NOTE)
    while json_bytes(text) - 2 > room:
        text = cut_text(text, utf8_size(text) - (json_bytes(text) - 2 - room), CUT_NOTE)
    return failed.model_copy(update={"error": ErrorInfo(type=kind, message=text)})
