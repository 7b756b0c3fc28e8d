"""Action frames over a WebSocket (dormant.http.actions.SocketActions, docs/realtime.md) on TestEnv: the answer frame
of each outcome, with the HTTP action route's status and code, and the socket's own (timeout, result too large)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import BaseModel

from dormant import ActionContext, actor, setup
from dormant.core.realtime import Action, parse
from dormant.http.actions import SocketActions
from dormant.settings import Settings
from dormant.testing import TestEnv
from dormant.workflow.caller import Caller


class Tally(BaseModel):
    count: int = 0


tally = actor("tally", state=Tally)


@tally.action
def add(c: ActionContext, n: int) -> int:
    c.state.count += n
    return c.state.count


@tally.action
async def slow(c: ActionContext) -> None:
    await asyncio.Event().wait()  # never answers: the socket's timeout ends it


@tally.action
def big(c: ActionContext, size: int) -> str:
    return "x" * size


@tally.action
def fails(c: ActionContext) -> None:
    raise ValueError("no")


REGISTRY = setup(tally)
CALLER = Caller(kind="dev", id="dev")


def frame(name: str, *args: Any, key: str = "t", **extra: Any) -> Action:
    parsed = parse(json.dumps({"type": "action", "id": 7, "actor": "tally", "key": [key], "name": name,
                               "args": list(args), **extra}))
    assert isinstance(parsed, Action)
    return parsed


async def answer(env: TestEnv, action: Action, **options: Any) -> dict[str, Any]:
    async def service() -> Any:
        return env.service

    actions = SocketActions(REGISTRY, Settings(max_body_bytes=1024), service, **options)  # type: ignore[call-arg]
    result: dict[str, Any] = json.loads(await actions(CALLER, action))
    assert result["type"] == "action_result" and result["id"] == 7
    return result


async def test_each_outcome_is_answered_with_the_http_routes_status_and_code() -> None:
    async with TestEnv(REGISTRY) as env:
        assert await answer(env, frame("add", 2)) == {"type": "action_result", "id": 7, "ok": True, "result": 2}
        errors = {name: (await answer(env, action))["error"] for name, action in {
            "unknown": frame("nope"), "types": frame("add", "two"), "arity": frame("add"),
            "fails": frame("fails"), "too big": frame("add", "x" * 2000), "missing": frame("add", 1, create=False,
                                                                                            key="never"),
            "unknown actor": Action(type="action", id=7, actor="nobody", key=["k"], name="add", args=[1])}.items()}
        assert {name: (e["status"], e["code"]) for name, e in errors.items()} == {
            "unknown": (404, "unknown_action"), "types": (422, "invalid_arguments"),
            "arity": (422, "invalid_arguments"), "fails": (500, "action_failed"),
            "too big": (413, "payload_too_large"), "missing": (404, "actor_not_found"),
            "unknown actor": (404, "unknown_actor")}
        assert errors["fails"]["message"] == "ValueError: no"
        assert await env.client.get_or_create("tally", ["t"]).call("add", 0) == 2  # none of them changed it


async def test_a_result_too_big_for_a_frame_and_an_action_past_the_timeout_are_answered() -> None:
    async with TestEnv(REGISTRY) as env:
        too_big = await answer(env, frame("big", 130 * 1024))
        assert (too_big["error"]["status"], too_big["error"]["code"]) == (413, "result_too_large")
        assert "POST /actors/{actor}/{key}/actions/big" in too_big["error"]["message"]
        late = await answer(env, frame("slow"), timeout=0.05)
        assert (late["error"]["status"], late["error"]["code"]) == (504, "action_timed_out")
