"""The realtime protocol (docs/realtime.md): JSON text frames over a WebSocket, the same on API Gateway's WebSocket
API and on `dormant dev`. No I/O here: the frames, their limits and the client's ordering rule.

Client -> server: `{"type": "subscribe", "actor": "order", "key": ["o-1"], "after": 12}` (events after seq 12),
`{"type": "unsubscribe", "actor": ..., "key": ...}`, `{"type": "ping"}`, and an action:
`{"type": "action", "id": <the client's correlation id>, "actor", "key", "name", "args": [...], "create"?: true}`.
Server -> client: `{"type": "event", "actor", "key", "seq", "name", "payload", "at"}` (with `"fetch": true` and no
payload when the frame would pass MAX_FRAME_BYTES: read it over HTTP, `GET .../events?after=seq-1&limit=1`),
`{"type": "subscribed", "actor", "key", "cursor"}` after the replay of the stored events up to `cursor`,
`{"type": "error", "code", "message", ...}`, `{"type": "pong"}`, and an action's answer:
`{"type": "action_result", "id", "ok": true, "result"}` or `{..., "ok": false, "error": {"status", "code", "message",
"detail"?}}` (the HTTP action route's status and error code for the same failure).

Replayed and live events may interleave or repeat (the worker pushes a commit's events while the replay reads the
stored ones): `Sequencer` turns what arrives into each subscription's events in seq order, each once, and says
when a gap needs a re-subscribe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dormant.core.limits import WEBSOCKET_FRAME
from dormant.core.records import EventRecord

# API Gateway's WebSocket frame is at most 128 KB (32 KB a frame, 4 frames): keep room for the envelope.
GATEWAY_MESSAGE_BYTES = WEBSOCKET_FRAME.maximum  # 128 KB
MAX_FRAME_BYTES = 120 * 1024
FANOUT_LIMIT = 100
"""Connections one commit's events are pushed to, per actor; beyond it, the oldest subscriptions are served and the
rest are not pushed (they read `GET .../events` or re-subscribe): docs/limits.md."""
POST_TIMEOUT_SECONDS = 2.0
"""The whole fan-out of one commit: posts still running then are abandoned (the wake-up is never held longer)."""
SUBSCRIPTION_TTL_SECONDS = 2 * 3600 + 600
"""A subscription's item outlives API Gateway's 2-hour connection limit by 10 minutes: a lost $disconnect leaves
nothing for long."""
MAX_SUBSCRIPTIONS = 20  # per connection
REPLAY_LIMIT = 1000  # stored events one subscribe replays; more: the client re-subscribes from its new cursor
ACTION_TIMEOUT_SECONDS = 25.0
"""An action over the socket answers within this (API Gateway's integration timeout is 29 s, the function's 30 s):
past it the answer is `action_timed_out` (it may have run and committed; read the state to know)."""
MAX_CORRELATION_ID = 128

Key = Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]


class Subscribe(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["subscribe"]
    actor: str
    key: Key
    after: int = Field(0, ge=0)


class Unsubscribe(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["unsubscribe"]
    actor: str
    key: Key


class Ping(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["ping"]


class Action(BaseModel):
    """Run an action (as `POST /actors/{actor}/{key}/actions/{name}` with `args` as its body): the same checks,
    authorization, limits and error codes."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["action"]
    id: Annotated[str, Field(min_length=1, max_length=MAX_CORRELATION_ID)] | int
    actor: str
    key: Key
    name: str
    args: Any = Field(default_factory=list)
    create: bool = True


Frame = Subscribe | Unsubscribe | Ping | Action


class Request(BaseModel):
    """One client frame."""

    frame: Annotated[Frame, Field(discriminator="type")]


def parse(text: str | bytes) -> Frame:
    """A client frame (pydantic's ValidationError when it is none)."""
    return Request.model_validate({"frame": json.loads(text)}).frame


def event_frame(actor: str, key: tuple[str, ...] | list[str], record: EventRecord, *, fetch: bool = False) -> str:
    """An event's frame; without its payload (`fetch`) when the frame would be too big or the payload is a
    reference to a stored value (the client reads it over HTTP)."""
    frame: dict[str, Any] = {"type": "event", "actor": actor, "key": list(key), "seq": record.seq,
                             "name": record.name, "at": record.at}
    if not fetch:
        text = json.dumps({**frame, "payload": record.payload}, separators=(",", ":"))
        if len(text.encode()) <= MAX_FRAME_BYTES:
            return text
    return json.dumps({**frame, "fetch": True}, separators=(",", ":"))


def subscribed_frame(actor: str, key: tuple[str, ...] | list[str], cursor: int) -> str:
    return json.dumps({"type": "subscribed", "actor": actor, "key": list(key), "cursor": cursor})


def error_frame(code: str, message: str, **extra: Any) -> str:
    return json.dumps({"type": "error", "code": code, "message": message, **extra})


def action_result_frame(correlation: str | int, result: Any) -> str | None:
    """An action's result; None when the frame would pass MAX_FRAME_BYTES."""
    text = json.dumps({"type": "action_result", "id": correlation, "ok": True, "result": result},
                      separators=(",", ":"))
    return text if len(text.encode()) <= MAX_FRAME_BYTES else None


def action_error_frame(correlation: str | int, status: int, code: str, message: str, detail: Any = None) -> str:
    error: dict[str, Any] = {"status": status, "code": code, "message": message}
    if detail is not None:
        error["detail"] = detail
    text = json.dumps({"type": "action_result", "id": correlation, "ok": False, "error": error},
                      separators=(",", ":"), default=str)
    if len(text.encode()) > MAX_FRAME_BYTES:  # a huge detail: the code and message still reach the client
        error.pop("detail", None)
        text = json.dumps({"type": "action_result", "id": correlation, "ok": False, "error": error})
    return text


@dataclass(slots=True)
class Sequencer:
    """One subscription's ordering on the client: events in seq order, each once, from `after` on.

    `take(frame)` -> the events now in order; a live event past a gap waits (`held`) until the replay fills it;
    `gap()` after `subscribed` says the stream skipped seqs the replay did not bring (re-subscribe from `cursor`)."""

    cursor: int = 0
    replayed: bool = False
    held: dict[int, dict[str, Any]] = field(default_factory=dict)

    def take(self, frame: dict[str, Any]) -> list[dict[str, Any]]:
        ready: list[dict[str, Any]] = []
        if frame.get("type") == "subscribed":
            # The replay brought every stored event up to the frame's cursor: a seq missing below it expired
            # (event_ttl_seconds), so what is held up to there goes out in order.
            self.replayed = True
            through = int(frame.get("cursor", 0))
            for seq in sorted(s for s in self.held if s <= through):
                ready.append(self.held.pop(seq))
            self.cursor = max(self.cursor, through, *(int(f["seq"]) for f in ready))
        elif frame.get("type") == "event" and int(frame["seq"]) > self.cursor:
            self.held[int(frame["seq"])] = frame
        while self.cursor + 1 in self.held:
            self.cursor += 1
            ready.append(self.held.pop(self.cursor))
        return ready

    def gap(self) -> bool:
        return self.replayed and bool(self.held)
