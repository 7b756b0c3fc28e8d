"""The replay cursor: matches the code's requests against recorded entries, scope by scope.

Within a scope (the root, a loop iteration, a join or race branch) recorded entries are matched
in recorded order. Asking for anything else than the next recorded entry, or finishing a scope
with recorded entries left over, is a divergence: it is detected before anything new runs.

The one exception is a version check (`ctx.get_version`): it exists to be inserted before recorded entries, so
it is recorded after them (its seq is the newest) but asked for before them; it is matched by name among the
scope's unvisited entries, wherever it stands (`Scope.claim_version`).
"""

from __future__ import annotations

import inspect
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from dormant.workflow.entries import Entry
from dormant.workflow.errors import EntryInProgressError, HistoryDivergedError, WorkflowDefinitionError
from dormant.workflow.history import EntryKind, parent_location

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_code_site() -> str | None:
    """file:line of the innermost frame outside the dormant package (the user's call)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR) and "asyncio" not in filename:
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


def function_site(fn: Callable[..., Any]) -> str | None:
    """file:line where a user function is defined: the code of a scope that finished with recorded
    entries unvisited (the stack at that point shows only the engine and its caller)."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else None


def describe(entry: Entry) -> str:
    return f'{entry.kind.value} "{entry.name}"'


class HistoryIndex:
    """The live history of one actor, indexed by location and by scope in recorded order."""

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self.by_location: dict[str, Entry] = {}
        self._children: dict[str, list[Entry]] = defaultdict(list)
        self.callbacks: set[str] = set()  # locations of callback entries (dormant.workflow.callbacks)
        for entry in sorted(entries, key=lambda e: e.seq):
            self.add(entry)
        self.next_seq = max((e.seq for e in self.by_location.values()), default=0) + 1

    def children(self, scope: str) -> list[Entry]:
        return self._children.get(scope, [])

    def add(self, entry: Entry) -> None:
        self.by_location[entry.location] = entry
        if entry.kind is EntryKind.CALLBACK:
            self.callbacks.add(entry.location)
        # A scope being run gets new entries only after all of its recorded ones (see Scope).
        self._children[parent_location(entry.location)].append(entry)

    def under(self, prefix: str) -> list[Entry]:
        """The entries at or under `prefix`."""
        below = prefix + "/"
        return [e for loc, e in self.by_location.items() if loc == prefix or loc.startswith(below)]

    def remove_prefix(self, prefix: str) -> int:
        """Drop every entry at or under `prefix`; returns how many were dropped."""
        below, by_location, callbacks = prefix + "/", self.by_location, self.callbacks  # (once, not per location)
        doomed = [loc for loc in by_location if loc.startswith(below) or loc == prefix]
        for loc in doomed:
            del by_location[loc]
            if callbacks:
                callbacks.discard(loc)
        for scope in [s for s in self._children if s.startswith(below) or s == prefix]:
            del self._children[scope]
        return len(doomed)

    def __len__(self) -> int:
        return len(self.by_location)


class Scope:
    """Replay cursor for one scope of a single run."""

    __slots__ = ("_busy", "_names", "_position", "_recorded", "_taken", "checkpointed", "location", "sealed")

    def __init__(self, location: str, recorded: list[Entry], *, checkpointed: bool,
                 sealed: bool = False) -> None:
        self.sealed = sealed  # completed in history: replay only
        self.location = location
        self._recorded = list(recorded)
        self._position = 0
        self._taken: set[int] = set()  # positions of version checks claimed ahead of the cursor (claim_version)
        self._names: set[str] = set()
        self._busy: str | None = None
        self.checkpointed = checkpointed

    def child(self, name: str) -> str:
        return f"{self.location}/{name}" if self.location else name

    def _advance(self) -> None:
        """Move the cursor past version checks already claimed ahead of it."""
        while self._taken and self._position in self._taken:
            self._position += 1

    @property
    def unvisited(self) -> bool:
        """Whether recorded entries of this scope remain that this run has not reached (it ran under older code)."""
        self._advance()
        return self._position < len(self._recorded)

    def claim_version(self, name: str) -> Entry | None:
        """`get_version(name)`: its recorded version check, wherever it stands among the unvisited entries, or None
        if it has none (new, or this scope ran under code without it)."""
        self._check_request(name)
        self._advance()
        for position in range(self._position, len(self._recorded)):
            entry = self._recorded[position]
            if entry.name != name or position in self._taken:
                continue
            if entry.kind is not EntryKind.VERSION_CHECK:
                raise HistoryDivergedError(
                    location=self.child(name), recorded=describe(entry), requested=f'version_check "{name}"',
                    code_site=user_code_site(), hint=self._mismatch_hint(entry, EntryKind.VERSION_CHECK, name))
            self._names.add(name)
            if position == self._position:
                self._position += 1
            else:
                self._taken.add(position)
            return entry
        self._names.add(name)
        return None

    def _check_request(self, name: str) -> None:
        if self._busy is not None:
            raise EntryInProgressError(
                f'"{name}" started at {self.location or "<root>"} while "{self._busy}" is still running '
                "in the same scope. Did you forget to await it? Use join/race to run things in parallel.")
        if name in self._names:
            raise WorkflowDefinitionError(
                f'duplicate entry name "{name}" at {self.location or "<root>"}: every step, loop, sleep, '
                "queue wait, join and race needs a unique name within its scope")

    def claim(self, kind: EntryKind, name: str) -> Entry | None:
        """Match the code's next request; returns the recorded entry, or None if it is new."""
        # (The checks of _check_request, inline: this runs once per entry of every replay.)
        if self._busy is not None or name in self._names:
            self._check_request(name)
        self._names.add(name)
        if self._taken:
            self._advance()
        if self._position < len(self._recorded):
            entry = self._recorded[self._position]
            if entry.kind is kind and entry.name == name:
                self._position += 1
                return entry
            raise HistoryDivergedError(
                location=self.child(name), recorded=describe(entry), requested=f'{kind.value} "{name}"',
                code_site=user_code_site(), hint=self._mismatch_hint(entry, kind, name))
        if self.sealed:
            raise HistoryDivergedError(
                location=self.child(name), recorded="nothing more (this branch completed in history)",
                requested=f'{kind.value} "{name}"', code_site=user_code_site(),
                hint="A completed join/race branch cannot grow new entries; restore the old branch code.")
        return None

    def _mismatch_hint(self, entry: Entry, kind: EntryKind, name: str) -> str:
        """What to do when the code asks for `kind name` where history has `entry` next."""
        retire = f'ctx.removed("{entry.name}", "{entry.kind.value}")'
        if entry.name == name:
            return (f'History recorded "{name}" as a {entry.kind.value} here; the code now asks for a {kind.value}. '
                    f"Restore the {entry.kind.value}, or retire it with {retire} and give the new {kind.value} "
                    "another name (names are unique per scope).")
        later = next((e for e in self._recorded[self._position + 1:] if e.kind is kind and e.name == name), None)
        if later is not None:  # recorded further on: the code moved it up, or what comes first is gone
            return (f"{describe(later)} is recorded further on in this scope, after {describe(entry)}. If the code "
                    "only moved entries, restore the recorded order: replay matches entries in recorded order, and "
                    f"retiring {describe(entry)} with ctx.removed would run it again wherever the code now asks "
                    f"for it. If {describe(entry)} is gone for good, retire it with {retire} where it was.")
        # Not recorded in this scope at all: the code replaced the recorded entry, or inserted this one before it.
        return (f"The code changed under a running actor. If it replaced {describe(entry)}, retire that with {retire}; "
                f'if it inserted {kind.value} "{name}" before recorded entries, guard it with ctx.get_version: '
                f'`if await ctx.get_version("{name}-added", 2) >= 2: ...` runs it only where this scope runs under the '
                "new code.")

    def skip_removed(self, name: str, kinds: tuple[EntryKind, ...]) -> bool:
        """`removed(name, kind)`: consume the next recorded entry if it is the retired one (a retired version check
        wherever it stands among the unvisited entries, as `claim_version` finds it)."""
        self._advance()
        if EntryKind.VERSION_CHECK in kinds:
            for position in range(self._position, len(self._recorded)):
                entry = self._recorded[position]
                if entry.name == name and entry.kind in kinds and position not in self._taken:
                    self._taken.add(position)
                    self._names.add(name)
                    self._advance()
                    return True
            return False
        if self._position < len(self._recorded):
            entry = self._recorded[self._position]
            if entry.name == name and entry.kind in kinds:
                self._position += 1
                self._names.add(name)
                return True
        return False

    def enter(self, name: str) -> None:
        self._busy = name

    def leave(self) -> None:
        self._busy = None

    def finish(self, code: Callable[..., Any] | None = None) -> None:
        """The scope's code (`code`: the workflow, loop body or branch function) is done: every
        recorded entry must have been visited."""
        self._advance()
        if self._position < len(self._recorded):
            entry = self._recorded[self._position]
            raise HistoryDivergedError(
                location=entry.location, recorded=describe(entry), requested=None,
                code_site=function_site(code) if code is not None else user_code_site(),
                hint="The code no longer reaches this recorded entry. Restore it, or retire it with "
                     f'ctx.removed("{entry.name}", "{entry.kind.value}").')
