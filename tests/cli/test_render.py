"""What the CLI shows a person: status in words for every workflow state, and the history timeline's shape."""

from __future__ import annotations

from io import StringIO

import pytest
from rich.console import Console

from dormant.cli.render import duration, status_words, timeline, when
from dormant.models import ActorStatus, Compensation, WaitingCallback, WaitingFor
from dormant.workflow.history import (
    BranchRecord,
    BranchStatus,
    DivergenceInfo,
    EntryKind,
    EntryStatus,
    ErrorInfo,
    HistoryEntry,
    RecordedMessage,
    WorkflowState,
)

NOW = 1_767_225_600.0


def plain(markup: str | object) -> str:
    console = Console(file=StringIO(), width=200, color_system=None)
    console.print(markup)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize(("status", "expected"), [
    (ActorStatus(workflow=WorkflowState.SLEEPING, waiting_for=WaitingFor(queues=["ship"])),
     "waits for a message on queue ship"),
    (ActorStatus(workflow=WorkflowState.SLEEPING, waiting_for=WaitingFor(queues=["a", "b"], deadline=NOW + 90)),
     "waits for a message on queues a, b or its deadline: 2026-01-01 00:01:30 UTC (in 1m 30s)"),
    (ActorStatus(workflow=WorkflowState.SLEEPING, waiting_for=WaitingFor(deadline=NOW + 7200)),
     "waits for a timer: 2026-01-01 02:00:00 UTC (in 2h 0m)"),
    (ActorStatus(workflow=WorkflowState.SLEEPING, waiting_for=WaitingFor(retry_at=NOW + 2)),
     "waits for the retry of a failed step at 2026-01-01 00:00:02 UTC (in 2.0 s)"),
    (ActorStatus(workflow=WorkflowState.SLEEPING, waiting_for=WaitingFor(deadline=NOW + 60, callbacks=[
        WaitingCallback(name="payment", location="payment", deadline=NOW + 3600, heartbeat_deadline=NOW + 60)])),
     "or callback payment from an outside system (times out 2026-01-01 01:00:00 UTC (in 1h 0m), a heartbeat by "
     "2026-01-01 00:01:00 UTC (in 1m 0s))"),
    (ActorStatus(workflow=WorkflowState.SLEEPING, waiting_for=WaitingFor(callbacks=[
        WaitingCallback(name="approval", location="loop/~2/approval")])),
     "waits for callback approval from an outside system\n"),
    (ActorStatus(workflow=WorkflowState.FAILED, error="StepExhaustedError: boom"),
     "error: StepExhaustedError: boom"),
    (ActorStatus(workflow=WorkflowState.DIVERGED, error="history diverged at x",
                 divergence=DivergenceInfo(location="x", recorded="step a", requested="step b", code_site=None,
                                           message="history diverged at x")),
     "divergence: history diverged at x"),
    (ActorStatus(workflow=WorkflowState.TERMINATED, error="Terminated: customer left"),
     "reason: Terminated: customer left"),
    (ActorStatus(workflow=WorkflowState.COMPLETED, output={"ok": True}), 'finished; output: {"ok": true}'),
    (ActorStatus(workflow=WorkflowState.PENDING), "its first wake-up is on its way"),
    (ActorStatus(workflow=WorkflowState.ROLLING_BACK, waiting_for=WaitingFor(retry_at=NOW - 5)),
     "the next try at 2025-12-31 23:59:55 UTC (5.0 s ago)"),
])
def test_status_in_words(status: ActorStatus, expected: str) -> None:
    assert expected in plain(status_words(status, NOW))


def test_a_compensated_failure_says_what_was_undone_and_offers_no_resume() -> None:
    status = ActorStatus(workflow=WorkflowState.FAILED, error="ConnectionError: down",
                         compensation=Compensation(undone=["hold", "loop/~2/book"]),
                         remedies=["pause", "terminate", "fork", "reset", "delete"],
                         advice="failed and was compensated: ... Reset it to a kept version")
    text = plain(status_words(status, NOW))
    assert "compensated: 2 step(s) undone, in this order: hold, loop/~2/book" in text
    assert "failed and was compensated: ... Reset it to a kept version" in text
    assert "operator actions that apply: pause, terminate, fork, reset, delete" in text
    assert "resume" not in text.replace("failed and was compensated", "")


def test_status_words_escape_markup_in_errors() -> None:
    text = plain(status_words(ActorStatus(workflow=WorkflowState.FAILED, error="KeyError: [bold]x[/bold]"), NOW))
    assert "[bold]x[/bold]" in text


def test_durations_and_moments() -> None:
    assert [duration(s) for s in (0.0123, 5.25, 125, 7300, 200_000)] == ["12 ms", "5.2 s", "2m 5s", "2h 1m", "2d 7h"]
    assert when(NOW - 3, NOW) == "2025-12-31 23:59:57 UTC (3.0 s ago)"


def entry(location: str, kind: EntryKind, seq: int, **fields: object) -> HistoryEntry:
    return HistoryEntry(location=location, kind=kind, name=location.rsplit("/", 1)[-1], seq=seq,
                        created_at=NOW, updated_at=NOW + 0.25, **fields)  # type: ignore[arg-type]


def test_the_timeline_nests_iterations_and_branches_in_execution_order() -> None:
    entries = [
        entry("open", EntryKind.STEP, 1, status=EntryStatus.COMPLETED, output="ok", attempts=2),
        entry("loop", EntryKind.LOOP, 2, iteration=4, loop_state={"n": 4}),
        entry("loop/~3/wait", EntryKind.MESSAGE, 3, status=EntryStatus.COMPLETED,
              messages=[RecordedMessage(id="m", name="add", body={"n": 1}, created_at=NOW)]),
        entry("loop/~3/apply", EntryKind.STEP, 4, status=EntryStatus.FAILED,
              error=ErrorInfo(type="ValueError", message="bad")),
        entry("nap", EntryKind.SLEEP, 5, deadline=NOW + 60),
        entry("both", EntryKind.JOIN, 6, branches={"a": BranchRecord(status=BranchStatus.COMPLETED),
                                                    "b": BranchRecord(status=BranchStatus.PENDING)}),
        entry("both/a/left", EntryKind.STEP, 7, status=EntryStatus.COMPLETED, output=1),
    ]
    lines = plain(timeline(list(reversed(entries)), "t")).splitlines()
    text = "\n".join(lines)
    assert lines[0] == "t"
    assert '✓ step open → "ok" in 250 ms (2 attempts)' in text
    assert 'loop loop: iteration 4, state {"n": 4}' in text
    assert "iteration 3" in text and 'wait wait: received add {"n": 1}' in text
    assert "✗ step apply" in text and "ValueError: bad" in text
    assert "sleep nap until 2026-01-01 00:01:00 UTC" in text
    assert "join both: a completed, b pending" in text and "branch a" in text
    order = [next(i for i, line in enumerate(lines) if needle in line)
             for needle in ("step open", "loop loop", "iteration 3", "step apply", "sleep nap", "join both",
                            "step left")]
    assert order == sorted(order)  # execution order, whatever order the entries came in
    depth = {needle: len(next(line for line in lines if needle in line)) - len(
        next(line for line in lines if needle in line).lstrip("│├└─ ")) for needle in ("step open", "step apply")}
    assert depth["step apply"] > depth["step open"]  # inside its iteration


def test_the_timeline_shows_a_map_with_its_items_and_their_outcomes() -> None:
    entries = [
        entry("charge", EntryKind.MAP, 1, status=EntryStatus.COMPLETED, items=[{"id": 1}, {"id": 2}, {"id": 3},
                                                                             {"id": 4}]),
        entry("charge/0", EntryKind.MAP_ITEM, 2, status=EntryStatus.COMPLETED, output={"paid": 1}),
        entry("charge/0/pay", EntryKind.STEP, 3, status=EntryStatus.COMPLETED, output={"paid": 1}),
        entry("charge/1", EntryKind.MAP_ITEM, 4, status=EntryStatus.FAILED,
              error=ErrorInfo(type="StepExhaustedError", message="declined")),
        entry("charge/2", EntryKind.MAP_ITEM, 5, status=EntryStatus.CANCELLED),
        entry("next", EntryKind.MAP, 6, items=[1]),
        entry("next/0", EntryKind.MAP_ITEM, 7),
    ]
    lines = plain(timeline(list(reversed(entries)), "t")).splitlines()
    text = "\n".join(lines)
    assert "✓ map charge (4 items): 1 succeeded, 1 failed, 1 cancelled, 1 not started" in text
    assert '✓ item 0: succeeded → {"paid": 1}' in text
    assert "✗ item 1: failed" in text and "StepExhaustedError: declined" in text
    assert "⊘ item 2: cancelled" in text
    assert "… map next (1 item): 1 in flight" in text and "… item 0: in flight" in text
    depth = {needle: len(next(line for line in lines if needle in line)) - len(
        next(line for line in lines if needle in line).lstrip("│├└─ ")) for needle in ("map charge", "item 0",
                                                                                       "step pay")}
    assert depth["map charge"] < depth["item 0"] < depth["step pay"]  # items under their map, steps under items
