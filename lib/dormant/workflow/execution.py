"""One run of an actor's workflow: the shared bookkeeping every primitive works on.

`Execution` holds the replay index, the uncommitted changes and the commit protocol. It does no
I/O itself: commits go through the `Checkpointer` the runtime passes in, and everything the actor
layer provides (queue schemas, step contexts) comes through `WorkflowHost`.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from enum import Enum
from typing import Any, NoReturn, TypeVar

from pydantic_core import to_jsonable_python

from dormant.workflow.checked import completed_entry_bound, measured, reused_sizes
from dormant.workflow.entries import Entry, working_copies
from dormant.workflow.errors import InvalidJsonError
from dormant.workflow.history import (
    CallbackChange,
    EntryKind,
    ErrorInfo,
    HistoryEntry,
    QueuedMessage,
    WorkflowRecord,
    WorkflowState,
)

# The commit and step-attempt values are the host port's (dormant.workflow.host); stores and the runtime import
# them from here too.
from dormant.workflow.host import CommitDraft as CommitDraft
from dormant.workflow.host import StepRun as StepRun
from dormant.workflow.host import WaitPort, WorkflowHost
from dormant.workflow.replay import HistoryIndex
from dormant.workflow.signals import DeadlinePassed, WakeAborted, WakeRestart
from dormant.workflow.state_cell import StateCell
from dormant.workflow.values import check_json

T = TypeVar("T")


def to_json(value: Any, what: str = "the value") -> Any:
    """The JSON form every recorded value takes; the workflow always sees this form.

    Raises InvalidJsonError (naming `what` and the path) for anything the store could not read back."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (str, int, float)):
        return check_json(value, what)
    try:
        converted = to_jsonable_python(value)
    except UnicodeEncodeError:  # a lone surrogate in a dict key: find it in the value as given
        check_json(value, what)
        raise InvalidJsonError(f"{what} cannot be stored: it holds a lone surrogate (U+D800-U+DFFF)",
                               rule="lone surrogate") from None
    return check_json(converted, what)


def error_info(error: BaseException) -> ErrorInfo:
    return ErrorInfo(type=type(error).__name__, message=str(error))


class Mode(Enum):
    NORMAL = "normal"
    ROLLBACK = "rollback"  # replaying only, to collect compensation handlers


Checkpointer = Callable[[CommitDraft], Awaitable[None]]
Now = Callable[[], float]
RollbackHandler = Callable[[Any, Any], Any]


class _Resume:
    """Awaiting it goes on with a coroutine that was started elsewhere and suspended on `pending`."""

    __slots__ = ("_coro", "_pending")

    def __init__(self, coro: Coroutine[Any, Any, Any], pending: Any) -> None:
        self._coro = coro
        self._pending = pending

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, pending = self._coro, self._pending
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as error:  # thrown in by the task (a cancellation): the coroutine's to handle
                try:
                    pending = coro.throw(error)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    pending = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _resumed(coro: Coroutine[Any, Any, T], pending: Any) -> T:
    result: T = await _Resume(coro, pending)
    return result


def settle_eagerly(operation: Coroutine[Any, Any, T]) -> tuple[bool, Any]:
    """`operation` run now, in the calling task, up to its first suspension: (True, its value) if it finished
    without suspending (the in-memory store answers at once: no future, task or turn of the event loop), else
    (False, a future of its outcome: its error, or a task that runs the rest, as `asyncio.ensure_future` would have
    run the whole). For store calls that must not be cut off half-way."""
    # In a context of its own, as a task's: what it sets (a client's context variables) stays its own, and a task
    # that runs the rest runs in that same context (a variable set before the suspension is reset after it).
    context = contextvars.copy_context()
    try:
        pending = context.run(operation.send, None)
    except StopIteration as stop:
        return True, stop.value
    except asyncio.CancelledError:
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        done.cancel()
        return False, done
    except Exception as error:
        done = asyncio.get_running_loop().create_future()
        done.set_exception(error)
        return False, done
    return False, asyncio.get_running_loop().create_task(_resumed(operation, pending), context=context)


def start_eagerly(operation: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """`settle_eagerly` as a future (a finished one if `operation` did not suspend)."""
    finished, value = settle_eagerly(operation)
    if not finished:
        running: asyncio.Future[T] = value
        return running
    done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    done.set_result(value)
    return done


async def run_to_the_end(operation: Awaitable[None], *, eager: bool = False) -> tuple[bool, BaseException | None]:
    """Await `operation` to its end even if the calling task is cancelled meanwhile.

    A race loser is cancelled while it may be the branch that happens to commit for the whole run;
    abandoning that store call half-way would void the wake-up. Returns (caller was cancelled, the
    operation's error or None). `eager`: started at once in this task (`start_eagerly`), so an operation that
    finishes without suspending costs no task; not for commits, whose order beside other branches' steps stays the
    one a turn of the event loop gives on every store.
    """
    if eager and isinstance(operation, Coroutine):
        finished, running = settle_eagerly(operation)
        if finished:
            return False, None
        task: asyncio.Future[None] = running
    else:
        task = asyncio.ensure_future(operation)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = cancelled or not task.done()
        except BaseException:  # the operation's own error: read from the task below
            pass
    if task.cancelled():
        return cancelled, asyncio.CancelledError()
    return cancelled, task.exception()


class Execution:
    """Bookkeeping for one run (one wake-up) of one actor's workflow."""

    def __init__(self, *, host: WorkflowHost, entries: Sequence[HistoryEntry], record: WorkflowRecord,
                 state: StateCell, inbox: Sequence[QueuedMessage], now: Now, checkpointer: Checkpointer,
                 serial: bool = False, workflow_input: Any = None,
                 race_winners: dict[str, str] | None = None, waits: WaitPort | None = None,
                 search: dict[str, Any] | None = None, deadline: float | None = None) -> None:
        self.host = host
        # The workflow's deadline (actor(..., workflow_timeout=...)) on the clock `now` reads; None: none.
        self.deadline = deadline
        self.index = HistoryIndex(working_copies(entries))
        self.loaded_record = record
        # The loaded record itself: the engine replaces its record (model_copy with changes), never changes one in
        # place, so it needs no copy of its own
        self.record = record
        self.state = state
        self.inbox: list[QueuedMessage] = []
        self.callback_messages: dict[str, QueuedMessage] = {}  # completions by message id (dormant.workflow.callbacks)
        self.add_inbox(inbox)
        self.now = now
        self.serial = serial
        # Winners decided by an earlier attempt of this wake-up (race location -> branch; map location -> the
        # items it finished, in order, comma-separated): a serial re-run after a WakeRestart tries those first,
        # so the restart cannot change the winner (or the map's decision).
        self.race_winners = race_winners if race_winners is not None else {}
        self.input = workflow_input
        self.waits = waits  # in-process waits (dormant.workflow.waits); None: every wait suspends
        self.mode = Mode.ROLLBACK if record.state is WorkflowState.ROLLING_BACK else Mode.NORMAL
        self._checkpointer = checkpointer
        self._dirty: dict[str, Entry] = {}
        self._deleted: list[str] = []
        self._consumed: list[str] = []
        self._responses: dict[str, Any] = {}
        self._callbacks: list[CallbackChange] = []
        self.deleted_callbacks: list[Entry] = []
        self.events: list[tuple[str, Any]] = []
        # The actor's search attributes with the changes of the steps that succeeded (the host's step contexts read
        # this very dict), and the changes the next commit stores.
        self.search: dict[str, Any] = search if search is not None else {}
        self._search_changes: dict[str, Any] = {}
        self._preview: CommitDraft | None = None  # the draft the last check_storable passed (its sizes measured)
        # The most JSON bytes each value of a draft may take for the host's check_commit to pass it whatever else it
        # holds (None: the check looks at more than that): check_storable checks no draft whose values are all
        # provably within it.
        self._value_ceiling: int | None = getattr(host, "value_ceiling", None)
        self.state_touched = False  # a step or handler used the state since the last draft (see _draft)
        # The host's queues, as the set a queue wait without `names` waits on (made by the first, not per wait)
        self.declared_queues: frozenset[str] | None = None
        # The state's JSON as the last step that used it left it (its result's check dumped it), while no step has
        # started since: the next draft stores it instead of dumping the state again. None: unknown.
        self.state_json: dict[str, Any] | None = None
        self._running: tuple[WorkflowRecord, Mode, WorkflowRecord] | None = None
        self._stored_record: WorkflowRecord | None = None  # the record object the last commit stored
        self.in_flight = 0  # step bodies and rollback handlers running now (step_started/step_ended)
        self._idle_waiters: list[asyncio.Future[None]] = []
        self.uncommitted_successes = 0
        self._commit_wanted = False
        self._lock = asyncio.Lock()
        self.rollback_handlers: list[tuple[Entry, RollbackHandler]] = []
        self.commits = 0
        self._aborted: BaseException | None = None
        self.replayed = 0  # entries served from history in this run (benchmarks)
        # Set when a failed attempt's state changes could not be undone: the wake-up will be re-run
        # serially, and nothing of this run (whose state holds those changes) may be committed.
        self.restart_pending = False
        self.root_task: asyncio.Task[Any] | None = None  # the task running the workflow function
        # Set when a join/race branch diverged: its siblings must not start anything new meanwhile.
        self.divergence: BaseException | None = None

    @property
    def rolling_back(self) -> bool:
        return self.mode is Mode.ROLLBACK

    # ---- entries -----------------------------------------------------------------------
    def check_deadline(self) -> None:
        """Raise DeadlinePassed if the workflow's deadline has passed: called before any new work (a new entry, a
        step attempt, a message taken), never while replaying or rolling back."""
        if self.deadline is not None and self.mode is Mode.NORMAL and self.now() >= self.deadline:
            raise DeadlinePassed(self.deadline)

    def new_entry(self, kind: EntryKind, location: str, name: str, **fields: Any) -> Entry:
        # (A map item's entry is made in a task's done callback, where nothing may raise: its steps check.)
        if self.deadline is not None and kind is not EntryKind.MAP_ITEM:
            self.check_deadline()
        now = self.now()
        seq = self.index.next_seq
        entry = (Entry(location=location, kind=kind, name=name, seq=seq, created_at=now, updated_at=now, **fields)
                 if fields else Entry.fresh(location, kind, name, seq, now))
        self.index.next_seq += 1
        self.index.add(entry)
        return entry

    def touch(self, entry: Entry, at: float | None = None) -> None:
        """Mark an entry changed (`at`, or now): it goes out with the next commit."""
        entry.updated_at = self.now() if at is None else at
        self._dirty[entry.location] = entry

    def delete_prefix(self, prefix: str) -> None:
        # An open callback deleted with its scope (a compacted loop iteration) is over: closed before the run's end
        # (dormant.workflow.callbacks.close_ended).
        if self.index.callbacks:  # (the index's callback entries: none, most often, and nothing to look for)
            self.deleted_callbacks += [e for e in self.index.under(prefix) if e.kind is EntryKind.CALLBACK]
        if not self.index.remove_prefix(prefix):
            return  # nothing stored under it (already compacted)
        below = prefix + "/"
        for loc in [loc for loc in self._dirty if loc.startswith(below) or loc == prefix]:
            del self._dirty[loc]
        self._deleted.append(prefix)

    # ---- inbox -------------------------------------------------------------------------
    def take_messages(self, names: frozenset[str], count: int) -> list[QueuedMessage]:
        taken: list[QueuedMessage] = []
        for message in self.inbox:
            if message.name in names:
                taken.append(message)
                if len(taken) == count:
                    break
        for message in taken:
            self.inbox.remove(message)
            self._consumed.append(message.id)
        return taken

    def add_inbox(self, messages: Sequence[QueuedMessage]) -> None:
        """Messages loaded, or arrived while the wake-up waited in process (see dormant.workflow.waits)."""
        for message in messages:
            if message.kind == "callback":
                self.callback_messages[message.id] = message
            else:
                self.inbox.append(message)

    def consume(self, message_id: str) -> None:
        """The message leaves the inbox with the next commit (a callback's completion, taken or dropped)."""
        self.callback_messages.pop(message_id, None)
        self._consumed.append(message_id)

    def callback_changed(self, change: CallbackChange) -> None:
        """A callback opened or closed: its lookup record follows the next commit."""
        self._callbacks.append(change)

    def add_response(self, message_id: str, response: Any) -> None:
        self._responses[message_id] = response

    def keep_effects(self, run: StepRun) -> None:
        """A step attempt (or rollback handler) succeeded: the events it broadcast and the search attributes it set
        go out with the next commit."""
        self.events.extend(run.events)
        if run.search:
            self.set_search(run.search)

    def set_search(self, changes: dict[str, Any]) -> None:
        """A step (or rollback handler) that set search attributes succeeded: they go out with the next commit."""
        for name, value in changes.items():
            if value is None:
                self.search.pop(name, None)
            else:
                self.search[name] = value
        self._search_changes.update(changes)

    # ---- the run as a whole ------------------------------------------------------------------
    def diverge(self, error: BaseException) -> None:
        """A branch or map item diverged (`error`, a HistoryDivergedError): the wake-up stops, and the scopes
        running beside it start nothing new (dormant.workflow.frame.Frame.check_cancelled raises it)."""
        self.divergence = error

    def restart_serially(self) -> NoReturn:
        """A failed attempt's state changes cannot be undone (another step ran beside it): nothing of this run may
        be committed; the wake-up is run again from storage, with parallel branches one at a time."""
        self.restart_pending = True
        raise WakeRestart()

    def check_storable(self, entry: Entry, output: Any, state: dict[str, Any] | None,
                       events: list[tuple[str, Any]], attempt: int, at: float) -> None:
        """Raise if `entry` completed with `output` (and `state`, `events`) could not be committed: called before
        a step's result is accepted, so a value too big to store fails the attempt, not the wake-up. The preview
        holds the entry as it will be stored (attempt `attempt`, ended and touched `at`): the commit reuses the sizes
        measured here (dormant.workflow.checked). Where the host's check looks at each value's size only
        (`WorkflowHost.value_ceiling`) and these values are within it by a bound known without serializing them (the
        entry's fields and a plain output, the state's size from its check), nothing is previewed: the check would
        pass, and the commit measures them."""
        ceiling = self._value_ceiling
        if ceiling is not None and not self._responses and not self.events and not events and (
                not self._dirty or (len(self._dirty) == 1 and entry.location in self._dirty)):
            bound = completed_entry_bound(entry, output, attempt, at)
            if bound is not None:
                if state is None or state == self.state.committed:
                    bound += 4  # (no state in the draft: `null`)
                else:
                    state_size = self.state.known_size(state)
                    bound = (ceiling + 1 if state_size is None  # (not known without measuring: checked as always)
                             else bound + state_size[0] + sum(part.bounds()[1] for part in state_size[1]))
                if bound <= ceiling:  # (each value within the sum of their bounds: the check would pass)
                    self._preview = None
                    return
        preview = entry.to_json()
        preview["status"] = "completed"
        if output is not None:
            preview["output"] = output
        if entry.error is not None or entry.failure_kind is not None or entry.retry_at is not None:  # (else absent)
            for cleared in ("error", "failure_kind", "retry_at"):
                preview.pop(cleared, None)
        preview["attempts"], preview["ended_at"] = attempt, at
        if at != 0.0:
            preview["updated_at"] = at
        else:
            preview.pop("updated_at", None)
        upserts = ([e.to_json() for loc, e in self._dirty.items() if loc != entry.location] + [preview] if self._dirty
                   else [preview])  # (a step's preview after a commit: its entry alone)
        draft = CommitDraft(
            upserts=upserts, deleted_prefixes=list(self._deleted), consumed_ids=list(self._consumed),
            state=state if state is not None and state != self.state.committed else None,
            responses=dict(self._responses), events=[*self.events, *events], workflow=None,
            committed_at=self.now(), search=dict(self._search_changes) or None)
        if draft.state is not None:
            state_size = self.state.known_size(draft.state)
            if state_size is not None:  # (the engine knows its big strings and floats from the state's check)
                draft.sizes = measured(draft, *state_size)
        self.host.check_commit(draft)
        self._preview = draft

    def check_response(self, message_id: str, response: Any) -> None:
        """Raise if a completable message's response could not be committed (before it is recorded)."""
        self.host.check_commit(CommitDraft(
            upserts=[e.to_json() for e in self._dirty.values()], deleted_prefixes=list(self._deleted),
            consumed_ids=list(self._consumed), state=None, responses={**self._responses, message_id: response},
            events=list(self.events), workflow=None, committed_at=self.now(),
            search=dict(self._search_changes) or None))

    # ---- rollback handlers ---------------------------------------------------------------
    def register_rollback(self, entry: Entry, handler: RollbackHandler) -> None:
        if not entry.rollback_done:
            self.rollback_handlers.append((entry, handler))

    def drop_rollback_handlers(self, scope_location: str) -> None:
        """A loop iteration finished: its steps are no longer compensated."""
        prefix = scope_location + "/"
        self.rollback_handlers = [(e, h) for e, h in self.rollback_handlers if not e.location.startswith(prefix)]

    # ---- commits ---------------------------------------------------------------------------
    def _draft(self, record: WorkflowRecord | None) -> CommitDraft:
        upserts = [e.to_json() for e in self._dirty.values()]
        # The state is serialized only if a step looked at it since the last draft (nothing else can
        # change it during a run): most steps of a long workflow never do.
        state, changed = self.state.committed, False
        if self.state_touched:
            state = self.state_json if self.state_json is not None else self.state.dump()
            changed = state != self.state.committed
            self.state_touched = False
        draft = CommitDraft(upserts=upserts, deleted_prefixes=self._deleted, consumed_ids=self._consumed,
                            state=state if changed else None,
                            responses=self._responses, events=self.events, workflow=record,
                            committed_at=self.now(), search=self._search_changes or None, callbacks=self._callbacks)
        if self._preview is not None:  # the last step's check measured these values (dormant.workflow.checked)
            draft.sizes, self._preview = reused_sizes(self._preview, draft), None
        elif changed:  # (a state a step's check dumped: sized from what the check learned, as check_storable sizes it)
            state_size = self.state.known_size(state)
            if state_size is not None:  # (a host that checks each value's size only decides by the entries' sum)
                draft.sizes = measured(draft, *state_size, together=self._value_ceiling is not None)
        self._dirty, self._deleted, self._consumed, self._responses, self.events = {}, [], [], {}, []
        self._search_changes, self._callbacks = {}, []
        # No step is in flight when a draft is taken, so this state is a clean baseline for reverting
        # a later failed attempt, even while this commit is still under way (if it fails, the
        # wake-up is void anyway: see _aborted).
        self.state.committed = state
        self.state.kept = None
        self.uncommitted_successes = 0
        return draft

    async def _commit(self, record: WorkflowRecord | None, *, force: bool = False) -> bool:
        """`record` None: the stored workflow record stays as it is."""
        if self._aborted is not None:
            # A failed commit took its changes with it: a later commit (say, from a sibling join branch)
            # would store history with a hole in it. The wake-up is over.
            raise WakeAborted(self._aborted)
        if self.restart_pending:
            raise WakeRestart()
        draft = self._draft(record)
        if draft.is_empty() and not force:
            return False
        if asyncio.current_task() is self.root_task:  # nobody cancels it (but a teardown): no shield
            cancelled, error = False, None
            try:  # (awaited here: a coroutine of its own to catch its error costs a frame per commit)
                await self._checkpointer(draft)
            except BaseException as failed:  # examined below
                error = failed
        else:  # a branch task, which a race may cancel: never half-way through a commit
            cancelled, error = await run_to_the_end(self._checkpointer(draft))
        if error is not None:  # storage error or lost version race: the wake-up is void
            self._aborted = error
            raise WakeAborted(error) from error
        self.commits += 1
        if cancelled:
            raise asyncio.CancelledError()  # delivered once the commit is settled
        return True

    async def commit_now(self) -> None:
        """Commit what is pending before going on, once no step runs in another branch (a callback's token must
        be stored before anything can hand it out)."""
        self._commit_wanted = True
        while self._commit_wanted:
            await self.when_idle()
            await self.checkpoint()

    def want_commit(self) -> None:
        """A step finished: its result goes out with the next commit (see `flush`)."""
        self._commit_wanted = True

    async def flush(self) -> None:
        """Before a new side effect starts: commit finished step results that are still pending."""
        if self._commit_wanted:
            await self.checkpoint()

    async def checkpoint(self) -> None:
        """Commit what is pending, but only when no step is half-way through changing the state."""
        self._commit_wanted = True
        if self.in_flight:
            return
        async with self._lock:
            if self.in_flight or not self._commit_wanted:
                return
            self._commit_wanted = False
            running = self._running_record()
            # Mid-run commits after the first store the same record: leave it out (a smaller commit).
            unchanged = running is self._stored_record
            if await self._commit(None if unchanged else running):
                self._stored_record = running

    def _running_record(self) -> WorkflowRecord:
        """The record a mid-run commit stores: the loaded one, marked running (built once per record)."""
        if self._running is None or self._running[0] is not self.record or self._running[1] is not self.mode:
            self._running = (self.record, self.mode,
                             self.record.model_copy(update={"state": self.running_state()}))
        return self._running[2]

    def running_state(self) -> WorkflowState:
        return WorkflowState.ROLLING_BACK if self.rolling_back else WorkflowState.RUNNING

    async def finish(self, record: WorkflowRecord) -> bool:
        """Final commit of the run; skipped when nothing changed (e.g. a stale timer). A record equal to the loaded
        one, which no commit of this run replaced, is stored already: the commit leaves it out (None), as a mid-run
        commit leaves out the running record it stored before (a loop's wake-up that ends waiting as it began)."""
        async with self._lock:
            changed = record != self.loaded_record
            stored = not changed and self._stored_record is None
            committed = await self._commit(None if stored else record, force=changed)
            self.record = record
            return committed

    # ---- steps in flight ---------------------------------------------------------------------
    def step_started(self) -> None:
        self.in_flight += 1
        self.state_json = None  # (this step may change the state)

    def step_ended(self, run: StepRun) -> None:
        self.in_flight -= 1
        if run.touched_state:
            self.state_touched = True
        if not self.in_flight and self._idle_waiters:
            self._wake_idle_waiters()

    def ask_ended(self) -> None:
        """A step's ask for its limit ended (it touched no state): `step_ended` without a StepRun to make."""
        self.in_flight -= 1
        if not self.in_flight and self._idle_waiters:
            self._wake_idle_waiters()

    def _wake_idle_waiters(self) -> None:
        waiters, self._idle_waiters = self._idle_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def when_idle(self) -> asyncio.Future[None]:
        """Done once no step is in flight (at once if none is)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.in_flight:
            self._idle_waiters.append(waiter)
        else:
            waiter.set_result(None)
        return waiter

    def step_succeeded(self) -> None:
        self.uncommitted_successes += 1

    def clean_for_revert(self) -> bool:
        """True when undoing a failed step's state changes cannot undo anyone else's."""
        return self.in_flight == 0 and self.uncommitted_successes == 0

    def copy_output(self, entry: Entry) -> Any:
        return self.copy_output_value(entry.output)

    @staticmethod
    def copy_output_value(value: Any) -> Any:
        # Recorded values are handed out as copies so user code cannot edit history in place.
        return value if value is None or isinstance(value, (str, int, float, bool)) else copy.deepcopy(value)
