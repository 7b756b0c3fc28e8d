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
from rich.segment import Segments
from rich.table import Table
from rich.tree import Tree

from dormant.cli.common import key_text, out, print_json
from dormant.core.safetext import json_text, printable
from dormant.models import ActorCounts, ActorStatus, OperationResult
from dormant.ports import LISTED_STATUSES, ActorSummary
from dormant.workflow.history import (
    ITERATION_MARK,
    SEPARATOR,
    EntryKind,
    EntryStatus,
    HistoryEntry,
    OperatorNote,
    WorkflowState,
)

STATUS_STYLE = {"completed": "green", "failed": "red", "diverged": "magenta", "terminated": "dim",
                "rolling_back": "yellow", "sleeping": "cyan", "pending": "blue", "running": "cyan",
                "paused": "yellow", "intact": "green", "repaired": "yellow", "recovered": "yellow", "lost": "red",
                "missing": "red"}
MARK = {EntryStatus.COMPLETED: "[green]✓[/green]", EntryStatus.FAILED: "[red]✗[/red]",
        EntryStatus.PENDING: "[yellow]…[/yellow]", EntryStatus.CANCELLED: "[dim]⊘[/dim]"}


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


def stamp(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def when(moment: float, now: float) -> str:
    return f"{stamp(moment)} ({relative(moment, now)})"


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
        if waits.limits:  # a step waits for a slot; the deadline (without queues) is its next try
            names = ", ".join(f"[bold]{shown(name)}[/bold]" for name in waits.limits)
            retry = f" (next try {when(waits.deadline, now)}, or when a slot frees)" \
                if waits.deadline is not None and not waits.queues else ""
            parts.append(f"{'limit' if len(waits.limits) == 1 else 'limits'} {names}{retry}")
        # A callback's timeout (or heartbeat) is the workflow's deadline too: said once, on the callback.
        of_callback = {moment for cb in waits.callbacks for moment in (cb.deadline, cb.heartbeat_deadline)}
        if waits.deadline is not None and (waits.queues or not waits.limits) and waits.deadline not in of_callback:
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
    elif state is WorkflowState.PAUSED and status.paused is not None:
        lines.append(f"{note_words(status.paused, now)}; no wake-up runs it: messages sent to it wait, its "
                     "timers keep their time")
        was = status.paused.previous.value if status.paused.previous else "sleeping"
        kept = [f"queue(s) {', '.join(shown(q) for q in waits.queues)}" if waits.queues else "",
                f"deadline {when(waits.deadline, now)}" if waits.deadline is not None else "",
                f"retry {when(waits.retry_at, now)}" if waits.retry_at is not None else ""]
        lines.append(f"it was {styled(was)}" + (" (it waited for " + ", ".join(k for k in kept if k) + ")"
                                                if any(kept) else "") + "; `dormant unpause` lets it run again")
    if status.error:
        label = {"diverged": "divergence", "terminated": "reason"}.get(state.value, "error")
        lines.append(f"[red]{label}:[/red] {shown(status.error)}")
    if status.search:
        lines.append("search attributes: " + ", ".join(f"[bold]{shown(name)}[/bold]={attribute(value)}"
                                                       for name, value in sorted(status.search.items())))
    if status.compensation is not None:
        undone = status.compensation.undone
        lines.append(f"[yellow]compensated[/yellow]: {len(undone)} step(s) undone, in this order: "
                     + (", ".join(shown(location) for location in undone) or "-"))
        if status.compensation.failed:
            lines.append("[red]rollback failed[/red] (retried): "
                         + ", ".join(shown(location) for location in status.compensation.failed))
    if status.advice:  # (dormant.runtime.remedies: the rule resume and the dashboard follow too)
        lines.append(shown(status.advice))
        lines.append("operator actions that apply: " + ", ".join(status.remedies)
                     + (" (`dormant versions` lists the kept versions)" if "reset" in status.remedies else ""))
    if status.rewritten is not None:
        lines.append(note_words(status.rewritten, now))
    return "\n".join(lines)


def attribute(value: Any) -> str:
    """A search attribute's value: a string as it is (escaped), anything else as JSON."""
    return shown(value) if isinstance(value, str) else compact(value)


def note_words(note: OperatorNote, now: float) -> str:
    """An operator's action kept on the record, in words: what, who, why, when."""
    who = f"by {shown(note.by)}" if note.by else "by the application"
    why = f" ({shown(note.reason)})" if note.reason else ""
    what = {"pause": "paused", "reset": shown(note.detail or "reset"), "fork": shown(note.detail or "forked")}
    return f"[yellow]{what[note.action]}[/yellow] {who}{why}, {when(note.at, now)}"


def summaries_tables(rows: Sequence[ActorSummary], now: float) -> list[Table]:
    """The listing as tables, widest first: `since` gives way (a moment and how long ago, then how long ago
    only); the type, the key and the status never do. The version is not shown: the listing records the one
    that entered the status, not the current one (docs/storage.md, "Listing"; `dormant status` has it). A search's
    rows add a column per search attribute they have."""
    names = sorted({name for row in rows for name in row.attributes or {}})
    tables = []
    for full in (True, False):
        table = Table()
        for column in ("type", "key", "status", "since"):
            table.add_column(column, no_wrap=True)
        for name in names:
            table.add_column(shown(name), no_wrap=True)
        for row in rows:
            values = row.attributes or {}
            table.add_row(shown(row.name), shown_key(row.key), styled(row.status.value),
                          when(row.since, now) if full else relative(row.since, now),
                          *(attribute(values[name]) if name in values else "-" for name in names))
        tables.append(table)
    if names:  # narrower: the attributes in one column, one per line, that wraps (the keys never do)
        table = Table()
        for column in ("type", "key", "status", "since", "attributes"):
            table.add_column(column, no_wrap=column != "attributes", overflow="fold")
        for row in rows:
            values = row.attributes or {}
            table.add_row(shown(row.name), shown_key(row.key), styled(row.status.value), relative(row.since, now),
                          "\n".join(f"{shown(name)}={attribute(values[name])}" for name in names if name in values)
                          or "-")
        tables.append(table)
    return tables


def counts_table(found: Iterable[ActorCounts]) -> Table:
    """Counts per listed status, a row per actor type (`+`: counting stopped at the limit)."""
    table = Table()
    for column in ("type", *(status.value for status in LISTED_STATUSES)):
        table.add_column(column, no_wrap=True)
    for counts in found:
        cells = [counts.counts.get(status.value) for status in LISTED_STATUSES]
        table.add_row(shown(counts.actor), *(f"{c.count}{'' if c.exact else '+'}" if c else "-" for c in cells))
    return table


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
    # Laid out `needed` wide, then written a line at a time, unwrapped (Console.print(width=) cannot exceed the
    # console's width). The console's width is left alone: setting it and back would pin it, and every later print
    # in this process would ignore the terminal's (COLUMNS) width.
    for line in console.render_lines(renderable, console.options.update_width(needed), pad=False, new_lines=True):
        console.print(Segments(line), soft_wrap=True)


ITEM_OUTCOME = {EntryStatus.COMPLETED: "succeeded", EntryStatus.FAILED: "failed", EntryStatus.CANCELLED: "cancelled",
                EntryStatus.PENDING: "in flight"}


def _map_summary(entry: HistoryEntry, items: list[HistoryEntry]) -> str:
    """`map name (N items): 3 succeeded, 1 in flight, 6 not started`, from the map's item entries."""
    total = len(entry.items or [])
    counts = dict.fromkeys([*ITEM_OUTCOME.values(), "not started"], 0)
    for item in items:
        counts[ITEM_OUTCOME[item.status]] += 1
    counts["not started"] = max(total - len(items), 0)
    outcome = ", ".join(f"{count} {what}" for what, count in counts.items() if count)
    return f"({total} item{'s' if total != 1 else ''}){': ' + outcome if outcome else ''}"


def _label(entry: HistoryEntry, items: list[HistoryEntry] | None = None) -> str:
    # A step's last attempt (recorded since steps keep started_at/ended_at), not the time since its first attempt:
    # a step that failed, waited and was resumed took as long as its last run.
    took = (entry.ended_at - entry.started_at if entry.started_at is not None and entry.ended_at is not None
            else entry.updated_at - entry.created_at)
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
            if entry.throttled_since is not None:
                text += f" [yellow]waits for its limit since {when(entry.throttled_since, entry.updated_at)}[/yellow]"
        case EntryKind.LOOP:
            done = " done → " + compact(entry.output) if entry.status is EntryStatus.COMPLETED else ""
            state = f", state {compact(entry.loop_state)}" if entry.loop_state is not None else ""
            text = f"{mark} loop {name}: iteration {entry.iteration}{state}{done}"
        case EntryKind.SLEEP:  # (a moment and how long: the timeline has no "now" to be relative to)
            deadline = entry.deadline or 0
            long = duration(deadline - entry.created_at)
            text = (f"{mark} sleep {name}: slept {long}, until {stamp(deadline)}"
                    if entry.status is EntryStatus.COMPLETED
                    else f"{mark} sleep {name} until {stamp(deadline)} ({long} from its start)")
        case EntryKind.MESSAGE:
            received = "; ".join(f"{shown(m.name)} {compact(m.body)}" for m in entry.messages)
            if entry.timed_out:
                text = f"{mark} wait {name}: timed out"
            elif received:
                text = f"{mark} wait {name}: received {received}"
            else:
                until = f" (times out {stamp(entry.deadline)})" if entry.deadline is not None else ""
                text = f"{mark} wait {name}: waiting{until}"
        case EntryKind.CALLBACK:
            outcome = entry.callback.outcome if entry.callback else None
            result = f"→ {compact(entry.output)}" if outcome == "completed" else (outcome or "open").replace("_", " ")
            text = f"{mark} callback {name}: {result}"
        case EntryKind.JOIN | EntryKind.RACE:
            branches = ", ".join(f"{shown(b)} {r.status.value}" for b, r in entry.branches.items())
            winner = f", winner {shown(entry.winner)}" if entry.winner else ""
            text = f"{mark} {entry.kind.value} {name}: {branches}{winner}"
        case EntryKind.MAP:
            text = f"{mark} map {name} {_map_summary(entry, items or [])}"
        case EntryKind.MAP_ITEM:
            result = f" → {compact(entry.output)}" if entry.status is EntryStatus.COMPLETED else ""
            text = f"{mark} item {name}: {ITEM_OUTCOME[entry.status]}{result}"
        case _:
            text = f"{mark} {entry.kind.value} {name}"
    if entry.error is not None:
        text += f"\n[red]{shown(entry.error.type)}: {shown(entry.error.message)}[/red]"
    return text


def timeline(entries: list[HistoryEntry], title: str) -> Tree:
    """The history as a tree in execution order: loops hold their iterations, branches their steps."""
    root = Tree(title)
    nodes: dict[str, Tree] = {"": root}
    items: dict[str, list[HistoryEntry]] = {}  # map location -> its item entries
    for entry in entries:
        if entry.kind is EntryKind.MAP_ITEM:
            items.setdefault(entry.location.rpartition(SEPARATOR)[0], []).append(entry)
    for entry in sorted(entries, key=lambda e: e.seq):
        parent = _parent_node(nodes, entry.location.rpartition(SEPARATOR)[0])
        nodes[entry.location] = parent.add(_label(entry, items.get(entry.location)))
    return root


def _parent_node(nodes: dict[str, Tree], location: str) -> Tree:
    if location in nodes:
        return nodes[location]
    above, _, last = location.rpartition(SEPARATOR)
    parent = _parent_node(nodes, above)
    label = f"iteration {shown(last[1:])}" if last.startswith(ITERATION_MARK) else f"branch {shown(last)}"
    nodes[location] = parent.add(f"[dim]{label}[/dim]")
    return nodes[location]


def show_result(result: OperationResult, json: bool) -> int:
    """An operator action's one result (resume, pause, fork...): its line, or its JSON; exit code 0."""
    if json:
        print_json(result)
    else:
        out.print(f"[bold]{shown(result.actor)}[/bold] {shown_key(result.key)}: {result.outcome} — "
                  f"{shown(result.message)}")
    return 0
