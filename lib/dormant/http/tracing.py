"""A span per HTTP request (tracing on: dormant.runtime.tracing), continuing the caller's trace.

The parent is the request's W3C `traceparent` header, else API Gateway's `X-Amzn-Trace-Id` (an X-Ray trace header):
a send's stored message and its SQS wake-up carry the request's context on, so the wake-ups it causes belong to
the caller's trace. The span is named by the route's template (`POST /actors/{type}/{key}/queues/{name}`), never
by the key or a callback token. Pure ASGI, like dormant.http.access.
"""

from __future__ import annotations

from typing import Any

from dormant.http.access import ASGIApp, Message, Receive, Scope, Send, actor_of, logged_path
from dormant.runtime import tracing

NAMED = ("queues", "actions", "events")  # /actors/{type}/{key}/<these>/{name}


def route_of(path: str) -> str:
    """The route template of `path`: what may name a span (bounded cardinality, no key in it)."""
    parts = logged_path(path).split("/")
    if len(parts) >= 4 and parts[1] == "actors":
        parts[2], parts[3] = "{type}", "{key}"
        if len(parts) >= 6 and parts[4] in NAMED:
            parts[5] = "{name}"
    elif len(parts) >= 3 and parts[1] == "actors":
        parts[2] = "{type}"
    return "/".join(parts)


class TracedRequests:
    """ASGI middleware: one SERVER span per HTTP request."""

    def __init__(self, app: ASGIApp, tracer: Any = None) -> None:
        self.app = app
        current = tracing.current()
        self.tracer = tracer if tracer is not None else current.tracer if current is not None else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or self.tracer is None:
            await self.app(scope, receive, send)
            return
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}
        remote = tracing.span_context(headers.get("traceparent")) or tracing.span_context(
            headers.get("x-amzn-trace-id"))
        parent = trace.set_span_in_context(trace.NonRecordingSpan(remote)) if remote is not None else None
        method, path = str(scope.get("method", "?")), str(scope.get("path", "?"))
        route = route_of(path)
        attributes: dict[str, Any] = {"http.request.method": method, "http.route": route,
                                      "url.path": logged_path(path)}
        actor, key = actor_of(path)
        if actor is not None:
            attributes.update({"dormant.request.actor": actor, "dormant.request.key": key or ""})
        status = 500

        async def send_and_watch(message: Message) -> None:
            nonlocal status
            if message.get("type") == "http.response.start":
                status = int(message.get("status", 500))
            await send(message)

        with self.tracer.start_as_current_span(f"{method} {route}", context=parent, kind=SpanKind.SERVER,
                                               attributes=attributes) as span:
            try:
                await self.app(scope, receive, send_and_watch)
            finally:
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))


def install_tracing(app: Any) -> None:
    """Trace every request of `app` (a FastAPI app) when tracing is on; nothing at all when off."""
    if tracing.enabled():
        app.add_middleware(TracedRequests)


def spans_router() -> Any:
    """`GET /ui/spans/{actor}/{key}` (`dormant dev` only): the spans the dev stack's ring kept for an actor, for the
    dashboard's timeline. `enabled` false: tracing is off (the timeline then draws from history alone)."""
    from fastapi import APIRouter

    from dormant.http.keys import decode_key

    router = APIRouter(include_in_schema=False)

    @router.get("/ui/spans/{actor}/{key}")
    async def spans(actor: str, key: str) -> dict[str, Any]:
        current = tracing.current()
        ring = current.ring if current is not None else None
        if ring is None:
            return {"enabled": False, "spans": []}
        return {"enabled": True, "spans": ring.of(actor, decode_key(key))}

    return router
