"""`dormant dev`'s WebSocket API: API Gateway's, played on the API's own port (docs/realtime.md).

`ws://<host>:<port>/realtime` is the WebSocket API: a connection gets an id, its frames go to the same
`Gateway` the `$default` Lambda runs (dormant.aws.realtime), its close to `$disconnect`. `/@connections/{id}` is
the Management API the worker and the gateway post to (`POST` a frame, `GET` the connection, `DELETE` closes it;
410 `GoneException` for an id that is not connected), so the pushing code is the code that runs on Lambda.
Everything else goes to the HTTP API.

Who a connection is: in auth mode `jwt` with an issuer (DORMANT_JWT_ISSUER), the bearer token is checked at the
handshake by the `$connect` authorizer's own verifier (dormant.aws.authorizer: `Authorization: Bearer` or
`?token=`), and a refused one is refused the handshake (403); otherwise the dev user (`?user=`, as the HTTP API's
dev-user header).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from dormant.core.claims import caller_from_claims
from dormant.http.identity import DEV_USER_HEADER
from dormant.workflow.caller import Caller

if TYPE_CHECKING:
    from dormant.aws.authorizer import JwtVerifier
    from dormant.aws.realtime import Gateway

log = logging.getLogger("dormant.dev.gateway")
WEBSOCKET_PATH = "/realtime"
CONNECTIONS_PATH = "/@connections/"
DEV_USER_PARAM = "user"  # ?user=<name>: who a browser's connection is (it cannot set the dev-user header)


@dataclass
class _Socket:
    websocket: WebSocket
    connected_at: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_active: float = 0.0


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


class DevGateway:
    """An ASGI app: the WebSocket API and `@connections` in front of the HTTP API (`api`)."""

    def __init__(self, api: ASGIApp, verifier: JwtVerifier | None = None) -> None:
        self.api = api
        self.verifier = verifier  # auth mode jwt: the handshake's token is checked as the $connect authorizer does
        self.gateway: Gateway | None = None  # set once the stack's service is open
        self.sockets: dict[str, _Socket] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "websocket" and path == WEBSOCKET_PATH:
            await self._serve(WebSocket(scope, receive, send))
        elif scope["type"] == "http" and path.startswith(CONNECTIONS_PATH):
            await self._manage(scope, receive, send, path[len(CONNECTIONS_PATH):])
        else:
            await self.api(scope, receive, send)

    async def _serve(self, websocket: WebSocket) -> None:
        if self.gateway is None:
            await websocket.close(code=1013)  # try again later: the stack is starting
            return
        caller = await self._caller(websocket)
        if caller is None:
            await websocket.close(code=1008)  # before accept: the handshake is refused (403), as API Gateway's
            return
        # API Gateway's ids are 12 base64 characters ending in "="; made the same way here.
        connection_id = base64.b64encode(secrets.token_bytes(10)).decode().replace("/", "_").replace("+", "-")
        await websocket.accept()
        self.sockets[connection_id] = _Socket(websocket, time.time())
        log.info("realtime: %s connected (%s)", connection_id, caller.id)
        try:
            while True:
                text = await websocket.receive_text()
                self.sockets[connection_id].last_active = time.time()
                try:
                    await self.gateway.message(connection_id, caller, text)
                except Exception:  # as a failed Lambda: the client gets nothing for that frame
                    log.exception("realtime: $default of %s failed", connection_id)
        except WebSocketDisconnect:
            pass
        finally:
            self.sockets.pop(connection_id, None)
            try:
                await self.gateway.disconnect(connection_id)
            except Exception:
                log.exception("realtime: $disconnect of %s failed", connection_id)
            log.info("realtime: %s disconnected", connection_id)

    async def _caller(self, websocket: WebSocket) -> Caller | None:
        if self.verifier is None:
            # ?user= (a browser cannot set headers), else the HTTP API's dev-user header (the Python client sends it)
            user = (websocket.query_params.get(DEV_USER_PARAM) or websocket.headers.get(DEV_USER_HEADER)
                    or "dev").strip() or "dev"
            return Caller(kind="dev", id=user[:200])
        from dormant.aws.authorizer import TokenRefused, token_of

        token = token_of(dict(websocket.headers), dict(websocket.query_params))
        try:
            if token is None:
                raise TokenRefused("no_token")
            claims = await asyncio.to_thread(self.verifier.caller_claims, token)  # may fetch the JWKS
        except TokenRefused as refused:
            log.info("realtime: $connect refused: %s", refused.reason)
            return None
        return caller_from_claims(claims, issuer=self.verifier.issuer, audiences=self.verifier.audiences)

    async def _manage(self, scope: Scope, receive: Receive, send: Send, connection_id: str) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        socket = self.sockets.get(connection_id)
        method = scope["method"]
        if socket is None:
            await _answer(send, 410, {"message": f"connection {connection_id} is gone"}, error="GoneException")
            return
        if method == "POST":
            try:
                async with socket.lock:  # one frame at a time on a socket
                    await socket.websocket.send_text(body.decode())
            except Exception:  # closed under us
                self.sockets.pop(connection_id, None)
                await _answer(send, 410, {"message": f"connection {connection_id} is gone"}, error="GoneException")
                return
            await _answer(send, 200, None)
        elif method == "GET":
            await _answer(send, 200, {"ConnectedAt": _iso(socket.connected_at),
                                      "LastActiveAt": _iso(socket.last_active or socket.connected_at),
                                      "Identity": {"SourceIp": "127.0.0.1", "UserAgent": ""}})
        elif method == "DELETE":
            self.sockets.pop(connection_id, None)
            try:
                await socket.websocket.close()
            except Exception:
                log.debug("realtime: %s was closed already", connection_id)
            await _answer(send, 204, None)
        else:
            await _answer(send, 405, {"message": "POST, GET or DELETE"})


async def _answer(send: Send, status: int, body: dict[str, object] | None, *, error: str | None = None) -> None:
    content = json.dumps(body).encode() if body is not None else b""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())]
    if error is not None:
        headers.append((b"x-amzn-errortype", error.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})
