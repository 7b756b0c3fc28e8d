"""`WorkflowContext`: the API a workflow function sees."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, NoReturn

from dormant.workflow import branches, callbacks, loops, maps, queues, rollback, sleeps, steps, tries, versioning
from dormant.workflow.errors import StepOnlyError
from dormant.workflow.frame import Frame
from dormant.workflow.map_result import MapResult
from dormant.workflow.try_result import StepResult, TryResult

Branch = Callable[["WorkflowContext"], Awaitable[Any]]


class WorkflowContext:
    """Passed to workflow functions, loop bodies and branches. Durable primitives only.

    Actor state, vars, the client and broadcast are reachable only inside steps and actions,
    because code here re-runs on every replay.
    """

    def __init__(self, frame: Frame) -> None:
        """Made by the engine (the run loop, and the primitives through `Frame.context`), never by workflow code."""
        self._frame = frame  # the primitives work on the frame: this class is the public API and nothing else
        self.queue = queues.QueueApi(frame)

    @property
    def location(self) -> str:
        """This scope's location ("" at the root, e.g. "counter-loop/~3" in a loop iteration)."""
        return self._frame.scope.location

    @property
    def input(self) -> Any:
        """The input given when the actor was created (JSON), or None."""
        return self._frame.execution.input

    @property
    def is_replaying_rollback(self) -> bool:
        return self._frame.execution.rolling_back

    async def step(self, name: str, fn: Callable[[Any], Any], *, timeout: float | timedelta | None = None,
                   max_retries: int = steps.DEFAULT_MAX_RETRIES,
                   retry_backoff_base: float | timedelta = steps.DEFAULT_BACKOFF_BASE,
                   retry_backoff_max: float | timedelta = steps.DEFAULT_BACKOFF_MAX,
                   rollback: Callable[[Any, Any], Any] | None = None, limit: str | None = None,
                   limit_key: str | None = None, priority: int | None = None,
                   ephemeral: bool = False) -> Any:
        """Run `fn(step_ctx)` once and record its result (JSON); replays return the record.

        `limit`: the name of a limit declared with `setup(..., limits=...)`: each attempt first takes a slot of it
        (waiting, suspended, while the limit is full) and gives it back when the attempt ends. `limit_key`: for a
        keyed limit, the key it is bounded by (each key separately); `priority`: 1 (served first) to 5 (default 3),
        its place among the limit's waiters (aged: docs/semantics.md, "Keyed and prioritized limits").
        `ephemeral`: no commit of its own; the next commit of the run (a durable step, a wait's suspension, the
        run's end) stores it, and a crash before that runs it again (docs/semantics.md, "Ephemeral steps")."""
        return await steps.run_step(self._frame, name, fn, timeout=timeout, max_retries=max_retries,
                                    retry_backoff_base=retry_backoff_base, retry_backoff_max=retry_backoff_max,
                                    rollback=rollback, limit=limit, limit_key=limit_key, priority=priority,
                                    ephemeral=ephemeral)

    async def try_step(self, name: str, fn: Callable[[Any], Any], *, timeout: float | timedelta | None = None,
                       max_retries: int = steps.DEFAULT_MAX_RETRIES,
                       retry_backoff_base: float | timedelta = steps.DEFAULT_BACKOFF_BASE,
                       retry_backoff_max: float | timedelta = steps.DEFAULT_BACKOFF_MAX,
                       rollback: Callable[[Any, Any], Any] | None = None, limit: str | None = None,
                       limit_key: str | None = None, priority: int | None = None, ephemeral: bool = False,
                       catch: Iterable[str] | str = ("critical", "timeout", "exhausted")) -> StepResult:
        """`ctx.step` whose final failure is returned, not raised: `StepResult(ok, value, failure)`, the failure's
        `kind` being "critical" (NonRetryableError), "timeout" (the last attempt timed out) or "exhausted".
        Kinds not in `catch` raise StepExhaustedError as `ctx.step` does. Replays return the recorded failure."""
        frame = self._frame

        async def step() -> Any:
            return await steps.run_step(frame, name, fn, timeout=timeout, max_retries=max_retries,
                                        retry_backoff_base=retry_backoff_base, retry_backoff_max=retry_backoff_max,
                                        rollback=rollback, limit=limit, limit_key=limit_key,
                                        priority=priority, ephemeral=ephemeral)

        return await tries.run_try_step(frame, name, step, catch)

    async def try_(self, name: str, body: Branch, *,
                   catch: Iterable[str] | str = ("step", "join", "race")) -> TryResult:
        """Run `body(ctx)` (an async function of a context, like a join branch) in its own scope; a failure whose
        source is in `catch` ("step", "join", "race", "map", or "block": an exception of the block's own code) is
        returned as `TryResult(ok=False, failure=...)`. Replays return what was recorded."""
        return await tries.run_try(self._frame, name, body, catch)

    async def get_version(self, name: str, latest: int) -> int:
        """The version of the code at this point, for changing a workflow under running actors: `latest` (an int
        >= 1) where this scope runs under the current code, 1 where it ran under older code (it already holds
        recorded entries this run has not reached). Recorded: replays return the same version."""
        return await versioning.run_get_version(self._frame, name, latest)

    async def loop(self, name: str, body: Callable[..., Awaitable[Any]], *, state: Any = loops.NO_STATE,
                   history_keep: int = loops.DEFAULT_HISTORY_KEEP) -> Any:
        """Run `body(ctx)` (or `body(ctx, state)`) until it returns `Loop.break_(value)`."""
        return await loops.run_loop(self._frame, name, body, state=state, history_keep=history_keep)

    async def sleep(self, name: str, duration: float | timedelta) -> None:
        delay = steps.seconds(duration) or 0.0
        await sleeps.run_sleep_until(self._frame, name, self._frame.execution.now() + delay)

    async def sleep_until(self, name: str, when: datetime | float) -> None:
        await sleeps.run_sleep_until(self._frame, name, sleeps.epoch_seconds(when))

    async def callback(self, name: str, *, timeout: float | timedelta | None = None,
                       heartbeat_timeout: float | timedelta | None = None) -> callbacks.Callback:
        """Create a callback an outside system completes with `POST /callbacks/{cb.token}` (or `cb.url`); it is
        stored when this returns. Hand the token out in a step, then `await cb.result()`. `timeout`: how long it
        may take in all; `heartbeat_timeout`: how long between heartbeats. `name` must be declared on the actor
        (`callbacks={name: callback(Model)}`)."""
        return await callbacks.run_callback(self._frame, name, timeout=timeout, heartbeat_timeout=heartbeat_timeout)

    async def join(self, name: str, branch_fns: Mapping[str, Branch]) -> dict[str, Any]:
        return await branches.run_join(self._frame, name, branch_fns)

    async def race(self, name: str, branch_fns: Mapping[str, Branch]) -> branches.RaceResult:
        return await branches.run_race(self._frame, name, branch_fns)

    async def map(self, name: str, items: Iterable[Any], fn: Callable[[WorkflowContext, Any], Awaitable[Any]], *,
                  max_concurrency: int | None = None, min_successes: int | None = None,
                  tolerated_failures: int | None = None) -> MapResult:
        """Run `fn(item_ctx, item)` for each item (its JSON form, as recorded), at most `max_concurrency` items in
        flight (None: all at once). Ends as soon as the completion rule is decided, cancelling the items still in
        flight: with neither rule every item must succeed; `min_successes` succeeded ends it; more than
        `tolerated_failures` failed, or too few left to reach `min_successes`, raises `MapError`. Returns a
        `MapResult` with every item's outcome in item order. docs/semantics.md, "map"."""
        return await maps.run_map(self._frame, name, items, fn, max_concurrency=max_concurrency,
                                  min_successes=min_successes, tolerated_failures=tolerated_failures)

    async def rollback_checkpoint(self, name: str) -> None:
        await rollback.run_checkpoint(self._frame, name)

    async def removed(self, name: str, kind: str) -> None:
        await rollback.run_removed(self._frame, name, kind)

    def now(self) -> NoReturn:
        raise StepOnlyError("ctx.now() is not deterministic in workflow code; read the clock inside a step "
                            "(its result is recorded) or use ctx.sleep/ctx.sleep_until")

    def _step_only(self, what: str) -> NoReturn:
        raise StepOnlyError(
            f"ctx.{what} is only available inside a step or an action: workflow code re-runs on every "
            f"replay. Use `await ctx.step(name, lambda s: ... s.{what} ...)`.")

    @property
    def state(self) -> NoReturn:
        self._step_only("state")

    @property
    def vars(self) -> NoReturn:
        self._step_only("vars")

    def client(self) -> NoReturn:
        self._step_only("client()")

    def broadcast(self, *_: Any, **__: Any) -> NoReturn:
        self._step_only("broadcast(...)")

    @property
    def schedule(self) -> NoReturn:
        self._step_only("schedule")
