"""How the CLI shows things to a person: status in words, listings as tables, histories as a timeline."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from dormant.models import ActorStatus, OperationResult
from dormant.ports import ActorSummary
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


def when(moment: float, now: float) -> str:
    stamp = datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    delta = moment - now
    return f"{stamp} ({'in ' + duration(delta) if delta >= 0 else duration(delta) + ' ago'})"


def short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


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
            names = ", ".join(f"[bold]{escape(q)}[/bold]" for q in waits.queues)
            parts.append(f"a message on {'queue' if len(waits.queues) == 1 else 'queues'} {names}")
        if waits.deadline is not None:
            parts.append(f"{'its deadline' if waits.queues else 'a timer'}: {when(waits.deadline, now)}")
        if waits.retry_at is not None:
            parts.append(f"the retry of a failed step at {when(waits.retry_at, now)}")
        lines.append("waits for " + (" or ".join(parts) if parts else "nothing (a wake-up is due)"))
    elif state is WorkflowState.PENDING:
        lines.append("created; its workflow has not started yet (its first wake-up is on its way)")
    elif state is WorkflowState.RUNNING:
        lines.append("a wake-up is running it now (or stopped half-way: the next one goes on)")
    elif state is WorkflowState.COMPLETED:
        lines.append(f"finished; output: {escape(short(status.output, 400))}")
    elif state is WorkflowState.ROLLING_BACK:
        retry = f"; the next try at {when(waits.retry_at, now)}" if waits.retry_at else ""
        lines.append(f"compensating (rollback handlers run newest-first){retry}")
    if status.error:
        label = {"diverged": "divergence", "terminated": "reason"}.get(state.value, "error")
        lines.append(f"[red]{label}:[/red] {escape(status.error)}")
    if state is WorkflowState.DIVERGED:
        lines.append("deploy code that matches its history, then `dormant resume` it")
    elif state is WorkflowState.FAILED:
        lines.append("fix the cause, then `dormant resume` retries the failed step")
    return "\n".join(lines)


def summaries_table(rows: Iterable[ActorSummary], now: float, *, title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("type", "key", "status", "since", "version"):
        table.add_column(column, no_wrap=column != "key")
    for row in rows:
        table.add_row(escape(row.name), escape(",".join(row.key)), styled(row.status.value),
                      when(row.since, now), str(row.version))
    return table


def results_table(results: Iterable[OperationResult]) -> Table:
    table = Table()
    for column in ("actor", "key", "was", "outcome", "message"):
        table.add_column(column, overflow="fold")
    for r in results:
        colour = {"refused": "red", "not_found": "yellow", "unchanged": "dim"}.get(r.outcome, "green")
        table.add_row(escape(r.actor), escape(",".join(r.key)), styled(r.status.value) if r.status else "-",
                      f"[{colour}]{r.outcome}[/{colour}]", escape(r.message))
    return table


def _label(entry: HistoryEntry) -> str:
    took = entry.updated_at - entry.created_at
    mark = MARK.get(entry.status, "")
    name = f"[bold]{escape(entry.name)}[/bold]"
    match entry.kind:
        case EntryKind.STEP:
            text = f"{mark} step {name}"
            if entry.status is EntryStatus.COMPLETED:
                text += f" → {escape(short(entry.output))} in {duration(took)}"
            if entry.attempts > 1:
                text += f" ({entry.attempts} attempts)"
            if entry.retry_at is not None:
                text += f" [yellow]retry at {when(entry.retry_at, entry.updated_at)}[/yellow]"
        case EntryKind.LOOP:
            done = " done → " + escape(short(entry.output)) if entry.status is EntryStatus.COMPLETED else ""
            state = f", state {escape(short(entry.loop_state))}" if entry.loop_state is not None else ""
            text = f"{mark} loop {name}: iteration {entry.iteration}{state}{done}"
        case EntryKind.SLEEP:
            text = f"{mark} sleep {name} until {when(entry.deadline or 0, entry.created_at)}"
        case EntryKind.MESSAGE:
            received = "; ".join(f"{escape(m.name)} {escape(short(m.body, 60))}" for m in entry.messages)
            text = f"{mark} wait {name}: " + ("timed out" if entry.timed_out else f"received {received or '-'}")
        case EntryKind.JOIN | EntryKind.RACE:
            branches = ", ".join(f"{escape(b)} {r.status.value}" for b, r in entry.branches.items())
            winner = f", winner {escape(entry.winner)}" if entry.winner else ""
            text = f"{mark} {entry.kind.value} {name}: {branches}{winner}"
        case _:
            text = f"{mark} {entry.kind.value} {name}"
    if entry.error is not None:
        text += f"\n[red]{escape(entry.error.type)}: {escape(entry.error.message)}[/red]"
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
    label = f"iteration {last[1:]}" if last.startswith(ITERATION_MARK) else f"branch {escape(last)}"
    nodes[location] = parent.add(f"[dim]{label}[/dim]")
    return nodes[location]
