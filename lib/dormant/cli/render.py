"""How the CLI shows things to a person: status in words, listings as tables, histories as a timeline.

Whatever came from the API is shown through `shown` (Rich markup and terminal controls escaped) and keys through
`key_text`, in the form the commands take back. Tables never shorten a key or a type: `print_table` picks the
first variant that fits the terminal, and prints the last one wider than the terminal rather than cut a cell
(the terminal wraps the line; a pipe gets it whole).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.tree import Tree

from dormant.cli.common import key_text
from dormant.models import ActorStatus, OperationResult
from dormant.ports import ActorSummary
from dormant.safetext import json_text, printable
from dormant.workflow.history import (
    ITERATION_MARK,
    SEPARATOR,
    EntryKind,
    EntryStatus,
    HistoryEntry,
    WorkflowState,
)

STATUS_STYLE = {"completed": "green", "failed": "red", "diverged": "magenta", "terminated": "dim",
                "rolling_back": "yellow", "sleeping": "cyan", "pending": "blue", "running": "cyan"}
MARK = {EntryStatus.COMPLETED: "[green]✓[/green]", EntryStatus.FAILED: "[red]✗[/red]",
        EntryStatus.PENDING: "[yellow]…[/yellow]"}


def duration(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def relative(moment: float, now: float) -> str:
    delta = moment - now
    return "in " + duration(delta) if delta >= 0 else duration(delta) + " ago"


def when(moment: float, now: float) -> str:
    stamp = datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp} ({relative(moment, now)})"


def shown(text: str) -> str:
    """Text from the API, for Rich markup: on one line, terminal controls and markup escaped."""
    return escape(printable(text))


def shown_key(key: Sequence[str]) -> str:
    return escape(key_text(key))


def compact(value: Any) -> str:
    """A JSON value on one line, whole (Rich markup escaped, nothing a terminal acts on)."""
    return escape(json_text(json.dumps(value, ensure_ascii=False, default=str)))


def styled(state: str) -> str:
    style = STATUS_STYLE.get(state, "white")
    return f"[{style}]{state}[/{style}]"


def status_words(status: ActorStatus, now: float) -> str:
    """What the actor is doing, or waits for, in a sentence or two (Rich markup)."""
    state = status.workflow
    waits = status.waiting_for
    lines = [f"{styled(state.value)} (version {status.version})"]
    if state is WorkflowState.SLEEPING:
        parts = []
        if waits.queues:
            names = ", ".join(f"[bold]{shown(q)}[/bold]" for q in waits.queues)
            parts.append(f"a message on {'queue' if len(waits.queues) == 1 else 'queues'} {names}")
        if waits.deadline is not None:
            parts.append(f"{'its deadline' if waits.queues else 'a timer'}: {when(waits.deadline, now)}")
        if waits.retry_at is not None:
            parts.append(f"the retry of a failed step at {when(waits.retry_at, now)}")
        for cb in waits.callbacks:
            beat = f", a heartbeat by {when(cb.heartbeat_deadline, now)}" if cb.heartbeat_deadline is not None else ""
            ends = f"times out {when(cb.deadline, now)}" if cb.deadline is not None else "no timeout"
            until = f" ({ends}{beat})" if cb.deadline is not None or beat else ""
            parts.append(f"callback [bold]{shown(cb.name)}[/bold] from an outside system{until}")
        lines.append("waits for " + (" or ".join(parts) if parts else "nothing (a wake-up is due)"))
    elif state is WorkflowState.PENDING:
        lines.append("created; its workflow has not started yet (its first wake-up is on its way)")
    elif state is WorkflowState.RUNNING:
        lines.append("a wake-up is running it now (or stopped half-way: the next one goes on)")
    elif state is WorkflowState.COMPLETED:
        lines.append(f"finished; output: {compact(status.output)}")
    elif state is WorkflowState.ROLLING_BACK:
        retry = f"; the next try at {when(waits.retry_at, now)}" if waits.retry_at else ""
        lines.append(f"compensating (rollback handlers run newest-first){retry}")
    if status.error:
        label = {"diverged": "divergence", "terminated": "reason"}.get(state.value, "error")
        lines.append(f"[red]{label}:[/red] {shown(status.error)}")
    if state is WorkflowState.DIVERGED:
        lines.append("deploy code that matches its history, then `dormant resume` it")
    elif state is WorkflowState.FAILED:
        lines.append("fix the cause, then `dormant resume` retries the failed step")
    return "\n".join(lines)


def summaries_tables(rows: Sequence[ActorSummary], now: float) -> list[Table]:
    """The listing as tables, widest first: `since` gives way (a moment and how long ago, then how long ago
    only); the type, the key and the status never do. The version is not shown: the listing records the one
    that entered the status, not the current one (docs/storage.md, "Listing"; `dormant status` has it)."""
    tables = []
    for full in (True, False):
        table = Table()
        for column in ("type", "key", "status", "since"):
            table.add_column(column, no_wrap=True)
        for row in rows:
            table.add_row(shown(row.name), shown_key(row.key), styled(row.status.value),
                          when(row.since, now) if full else relative(row.since, now))
        tables.append(table)
    return tables


def results_table(results: Iterable[OperationResult]) -> Table:
    """Operation results; only the message column wraps (the one column that may: see `print_table`)."""
    table = Table()
    for column in ("actor", "key", "was", "outcome", "message"):
        table.add_column(column, no_wrap=column != "message", overflow="fold")
    for r in results:
        colour = {"refused": "red", "not_found": "yellow", "unchanged": "dim"}.get(r.outcome, "green")
        table.add_row(shown(r.actor), shown_key(r.key), styled(r.status.value) if r.status else "-",
                      f"[{colour}]{r.outcome}[/{colour}]", shown(r.message))
    return table


UNBOUNDED = 1_000_000
WRAPPED = 24  # the narrowest a wrapping column is made


def print_table(console: Console, variants: Sequence[Table]) -> None:
    """Print the first variant whose cells all fit the console's width unwrapped; else the last, its wrapping
    column (`no_wrap=False`: keep it to one, Rich shares the cuts between several) wrapped, and wider than the
    console if even that is too wide. Rich itself would shrink every column, keys included, down to nothing."""
    options = console.options.update_width(UNBOUNDED)
    for table in variants:
        widest = Measurement.get(console, options, table).maximum
        if widest <= console.width:
            console.print(table)
            return
    slack = 0
    for column in table.columns:
        if not column.no_wrap:  # it folds (overflow="fold"), long words too, down to WRAPPED characters
            longest = max(Measurement.get(console, options, cell).maximum for cell in (column.header, *column.cells))
            slack += longest - min(longest, WRAPPED)
    print_at_least(console, table, widest - slack)


def print_whole(console: Console, renderable: Tree) -> None:
    """Print a tree with no label cut: as wide as its longest line needs (the terminal wraps it)."""
    print_at_least(console, renderable, Measurement.get(console, console.options.update_width(UNBOUNDED),
                                                        renderable).maximum)


def print_at_least(console: Console, renderable: Table | Tree, needed: int) -> None:
    if needed <= console.width:
        console.print(renderable)
        return
    width = console.width
    console.width = needed  # Console.print(width=) cannot exceed the console's own width
    try:
        console.print(renderable, crop=False)
    finally:
        console.width = width


def _label(entry: HistoryEntry) -> str:
    took = entry.updated_at - entry.created_at
    mark = MARK.get(entry.status, "")
    name = f"[bold]{shown(entry.name)}[/bold]"
    match entry.kind:
        case EntryKind.STEP:
            text = f"{mark} step {name}"
            if entry.status is EntryStatus.COMPLETED:
                text += f" → {compact(entry.output)} in {duration(took)}"
            if entry.attempts > 1:
                text += f" ({entry.attempts} attempts)"
            if entry.retry_at is not None:
                text += f" [yellow]retry at {when(entry.retry_at, entry.updated_at)}[/yellow]"
        case EntryKind.LOOP:
            done = " done → " + compact(entry.output) if entry.status is EntryStatus.COMPLETED else ""
            state = f", state {compact(entry.loop_state)}" if entry.loop_state is not None else ""
            text = f"{mark} loop {name}: iteration {entry.iteration}{state}{done}"
        case EntryKind.SLEEP:
            text = f"{mark} sleep {name} until {when(entry.deadline or 0, entry.created_at)}"
        case EntryKind.MESSAGE:
            received = "; ".join(f"{shown(m.name)} {compact(m.body)}" for m in entry.messages)
            text = f"{mark} wait {name}: " + ("timed out" if entry.timed_out else f"received {received or '-'}")
        case EntryKind.CALLBACK:
            outcome = entry.callback.outcome if entry.callback else None
            result = f"→ {compact(entry.output)}" if outcome == "completed" else (outcome or "open").replace("_", " ")
            text = f"{mark} callback {name}: {result}"
        case EntryKind.JOIN | EntryKind.RACE:
            branches = ", ".join(f"{shown(b)} {r.status.value}" for b, r in entry.branches.items())
            winner = f", winner {shown(entry.winner)}" if entry.winner else ""
            text = f"{mark} {entry.kind.value} {name}: {branches}{winner}"
        case _:
            text = f"{mark} {entry.kind.value} {name}"
    if entry.error is not None:
        text += f"\n[red]{shown(entry.error.type)}: {shown(entry.error.message)}[/red]"
    return text


def timeline(entries: list[HistoryEntry], title: str) -> Tree:
    """The history as a tree in execution order: loops hold their iterations, branches their steps."""
    root = Tree(title)
    nodes: dict[str, Tree] = {"": root}
    for entry in sorted(entries, key=lambda e: e.seq):
        parent = _parent_node(nodes, entry.location.rpartition(SEPARATOR)[0])
        nodes[entry.location] = parent.add(_label(entry))
    return root


def _parent_node(nodes: dict[str, Tree], location: str) -> Tree:
    if location in nodes:
        return nodes[location]
    above, _, last = location.rpartition(SEPARATOR)
    parent = _parent_node(nodes, above)
    label = f"iteration {shown(last[1:])}" if last.startswith(ITERATION_MARK) else f"branch {shown(last)}"
    nodes[location] = parent.add(f"[dim]{label}[/dim]")
    return nodes[location]
