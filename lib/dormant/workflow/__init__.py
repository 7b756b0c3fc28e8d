"""The pure workflow engine: no boto, no HTTP, no file or network I/O."""

from dormant.workflow.branches import RaceResult
from dormant.workflow.callbacks import Callback
from dormant.workflow.caller import Caller
from dormant.workflow.context import WorkflowContext
from dormant.workflow.errors import (
    BranchError,
    CallbackCancelledError,
    CallbackError,
    CallbackFailedError,
    CallbackHeartbeatTimeoutError,
    CallbackTimeoutError,
    CallbackUrlError,
    DormantError,
    EntryInProgressError,
    HistoryDivergedError,
    JoinError,
    MapError,
    NonRetryableError,
    QueueTimeoutError,
    RaceError,
    RecordedError,
    RollbackCheckpointError,
    StepExhaustedError,
    StepOnlyError,
    StepTimeoutError,
    WorkflowDefinitionError,
    WorkflowTimeoutError,
)
from dormant.workflow.execution import Execution
from dormant.workflow.history import HistoryEntry, QueuedMessage, WorkflowRecord, WorkflowState
from dormant.workflow.host import CommitDraft, StepRun, WorkflowHost
from dormant.workflow.loops import Loop
from dormant.workflow.map_result import MapItem, MapItemStatus, MapResult
from dormant.workflow.queues import QueueMessage
from dormant.workflow.runner import run_workflow
from dormant.workflow.state_cell import StateCell
from dormant.workflow.try_result import ErrorDetail, StepFailure, StepResult, TryFailure, TryResult

__all__ = [
    "BranchError", "Callback", "CallbackCancelledError", "CallbackError", "CallbackFailedError",
    "CallbackHeartbeatTimeoutError", "CallbackTimeoutError", "CallbackUrlError", "Caller", "CommitDraft",
    "DormantError", "EntryInProgressError", "ErrorDetail", "Execution", "HistoryDivergedError", "HistoryEntry",
    "JoinError", "Loop", "MapError", "MapItem", "MapItemStatus", "MapResult", "NonRetryableError", "QueueMessage",
    "QueueTimeoutError", "QueuedMessage", "RaceError", "RaceResult", "RecordedError", "RollbackCheckpointError",
    "StateCell", "StepExhaustedError", "StepFailure", "StepOnlyError", "StepResult", "StepRun", "StepTimeoutError",
    "TryFailure", "TryResult", "WorkflowContext", "WorkflowDefinitionError", "WorkflowHost", "WorkflowRecord",
    "WorkflowState", "WorkflowTimeoutError", "run_workflow",
]
