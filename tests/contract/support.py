"""What the contract tests (and the DynamoDB-only tests beside them in tests/integration/) build their data from:
actors, commits, messages, search attributes and slot requests, as the runtime hands them to a store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dormant.core.search import parse_conditions, stored_value
from dormant.core.searchplan import SearchPlan, plan_search
from dormant.core.slots import DEFAULT_PRIORITY, LimitRule, SlotRequest
from dormant.ports import ActorMeta, ActorRef, ActorSnapshot, EventStore, InboxMessage
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import CallbackChange, WorkflowRecord, WorkflowState

T0 = 1_767_225_600.0  # 2026-01-01: the times the runtime writes into the data (not the store's own clock)


# -- actors, commits, messages --------------------------------------------------------------------------------------
def ref(key: str = "a") -> ActorRef:
    return ActorRef(name="counter", key=(key, "x/y"))  # a key part with a slash: ids are percent-encoded


def meta(key: str = "a", actor_input: Any = None) -> ActorMeta:
    return ActorMeta(name="counter", key=(key, "x/y"), created_at=T0, input=actor_input)


def entry(location: str, seq: int, output: Any = None, kind: str = "step") -> dict[str, Any]:
    return {"location": location, "kind": kind, "name": location.rsplit("/", 1)[-1], "seq": seq,
            "status": "completed", "output": output}


def draft(*, upserts: list[dict[str, Any]] | None = None, deleted: list[str] | None = None,
          state: dict[str, Any] | None = None, consumed: list[str] | None = None,
          responses: dict[str, Any] | None = None, events: list[tuple[str, Any]] | None = None,
          workflow: WorkflowRecord | None = None, at: float = T0 + 1, search: dict[str, Any] | None = None,
          callbacks: list[CallbackChange] | None = None) -> CommitDraft:
    return CommitDraft(upserts=upserts or [], deleted_prefixes=deleted or [], state=state,
                       consumed_ids=consumed or [], responses=responses or {}, events=events or [],
                       workflow=workflow, committed_at=at, search=search, callbacks=callbacks or [])


def message(mid: str, body: Any = None, **extra: Any) -> InboxMessage:
    return InboxMessage(id=mid, queue="counter", body=body if body is not None else {"delta": 1},
                        created_at=T0, **extra)


def record(state: WorkflowState) -> WorkflowRecord:
    return WorkflowRecord(state=state)


async def created(store: EventStore, key: str = "a", state: dict[str, Any] | None = None) -> ActorRef:
    actor = ref(key)
    assert await store.create(actor, meta(key), state or {"value": 0}, WorkflowRecord(), [])
    return actor


async def populated(store: EventStore) -> None:
    """counter: 3 failed, 1 sleeping, 1 pending; other: 1 failed."""
    for key, state in {"a": WorkflowState.FAILED, "b": WorkflowState.FAILED, "c": WorkflowState.FAILED,
                       "d": WorkflowState.SLEEPING, "e": None}.items():
        actor = await created(store, key)
        if state is not None:
            await store.commit(actor, 1, draft(workflow=WorkflowRecord(state=state), at=T0 + 2))
    other = ActorRef(name="other", key=("a",))
    await store.create(other, meta().model_copy(update={"name": "other", "key": ("a",)}), {}, WorkflowRecord(), [])
    await store.commit(other, 1, draft(workflow=WorkflowRecord(state=WorkflowState.FAILED)))


# -- many commits (kept versions) ----------------------------------------------------------------------------------
def loop_commits(count: int, *, state_bytes: int = 0) -> list[Any]:
    """Loop-like commits: each writes an iteration's entries, deletes the iteration two back (compaction), moves the
    state and, every third, the workflow record."""
    drafts = []
    for index in range(count):
        upserts = [entry(f"main/~{index}/take", 2 * index + 2, {"n": index}),
                   entry(f"main/~{index}/apply", 2 * index + 3, index)]
        deleted = [f"main/~{index - 2}"] if index >= 2 else []
        workflow = WorkflowRecord(state=WorkflowState.SLEEPING if index % 2 else WorkflowState.RUNNING,
                                  waiting_for=["counter"]) if index % 3 == 0 else None
        drafts.append(draft(upserts=upserts, deleted=deleted, state={"value": index, "pad": "p" * state_bytes},
                            workflow=workflow, at=T0 + index + 1))
    return drafts


async def apply_commits(store: EventStore, ref: ActorRef, drafts: list[Any],
                        through: Callable[[], EventStore] | None = None) -> dict[int, ActorSnapshot]:
    """Commit `drafts` one after the other, each through `through()` if given (e.g. a new process that loads the
    actor first), else `store`; the actor as loaded after each, by version."""
    seen: dict[int, ActorSnapshot] = {}
    version = 1
    first = await store.load(ref)
    assert first is not None
    seen[1] = first
    for commit in drafts:
        committer = store if through is None else through()
        if committer is not store:
            assert await committer.load(ref) is not None  # what a wake-up does first
        version = await committer.commit(ref, version, commit)
        loaded = await store.load(ref)
        assert loaded is not None
        seen[version] = loaded
    return seen


# -- search attributes (dormant.core.search) ------------------------------------------------------------------------
SEARCHED = "order"
DECLARED = {"customer": "s", "amount": "i", "score": "f", "vip": "b", "due": "t"}


def order(key: str) -> ActorRef:
    return ActorRef(name=SEARCHED, key=(key,))


def attributes(**values: Any) -> dict[str, Any]:
    """name -> [type code, JSON value] (None: unset), as steps' changes reach the store."""
    return {name: None if value is None else [DECLARED[name], stored_value(DECLARED[name], value)]
            for name, value in values.items()}


def search_draft(*, search: dict[str, Any] | None = None, state: WorkflowState | None = None,
                 at: float = T0 + 1) -> CommitDraft:
    return CommitDraft(upserts=[], deleted_prefixes=[], state=None, consumed_ids=[], responses={}, events=[],
                       workflow=WorkflowRecord(state=state) if state else None, committed_at=at, search=search)


async def make_order(store: EventStore, key: str, **values: Any) -> ActorRef:
    actor = order(key)
    assert await store.create(actor, ActorMeta(name=SEARCHED, key=actor.key, created_at=T0), {}, WorkflowRecord(),
                              [], search={k: v for k, v in attributes(**values).items() if v is not None})
    return actor


def where(*texts: str, declared: dict[str, str] = DECLARED) -> SearchPlan:
    return plan_search(SEARCHED, parse_conditions(SEARCHED, declared, texts))


async def found(store: EventStore, *texts: str, status: WorkflowState | None = None, limit: int = 100) -> list[str]:
    """The keys every page of the search gives, in order."""
    keys: list[str] = []
    cursor: str | None = None
    plan = where(*texts)
    for _ in range(100):
        page = await store.search_actors(plan, status=status, limit=limit, after=cursor)
        keys += [summary.key[0] for summary in page.actors]
        if page.cursor is None:
            return keys
        cursor = page.cursor
    raise AssertionError("the pages never ended")


# -- flow-control slots (dormant.core.slots) ------------------------------------------------------------------------
SLOTS = LimitRule(name="stripe", concurrency=2, window=1.0, per_window=None)
RATE = LimitRule(name="ses", concurrency=None, window=1.0, per_window=2)
BOTH = LimitRule(name="both", concurrency=1, window=1.0, per_window=1)


def ask(rule: LimitRule, holder: str, now: float = T0, *, lease: float = 60.0, since: float | None = None,
        queued: bool = False, priority: int = DEFAULT_PRIORITY) -> SlotRequest:
    return SlotRequest(rule=rule, ref=ActorRef(name="payer", key=(holder,)), holder=holder, now=now,
                       lease_until=now + lease, queued_since=now if since is None else since, queued=queued,
                       priority=priority)
