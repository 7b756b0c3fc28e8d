"""A stand-in for API Gateway's authorizers in front of the app (ASGI middleware), for the client tests.

`AWS_IAM`: recomputes the SigV4 signature of the request *as received* (method, path, query, the signed
headers, the body) with the caller's secret key, refuses a wrong or stale one with 403 as API Gateway does, and
hands the app the principal in the request context (`scope["aws.event"]`, where Mangum puts the event).
`JWT`: accepts the bearer tokens it was given (a real authorizer checks the signature) and passes their claims.
Every path goes through the authorizer, as template.yaml's one route ($default) does, the operator routes too.
"""

from __future__ import annotations

import datetime
import hmac
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
_AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                   r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$")
MAX_SKEW = datetime.timedelta(minutes=5)


class Gateway:
    def __init__(self, app: App, *, mode: str, users: dict[str, tuple[str, str]] | None = None,
                 tokens: dict[str, dict[str, Any]] | None = None) -> None:
        """`users`: access key id -> (secret key, principal ARN); `tokens`: bearer token -> claims."""
        self.app = app
        self.mode = mode
        self.users = users or {}
        self.tokens = tokens or {}
        self.seen: list[dict[str, Any]] = []  # the authorizer contexts handed to the app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        verdict = self.iam(scope, headers, body) if self.mode == "iam" else self.jwt(headers)
        if isinstance(verdict, str):
            await _refuse(send, 403 if self.mode == "iam" else 401, verdict)
            return
        self.seen.append(verdict)
        context: dict[str, Any] = {"http": {"method": scope["method"], "path": scope["path"]},
                                   "authorizer": verdict}
        scope = {**scope, "aws.event": {"version": "2.0", "requestContext": context}}
        replayed = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def iam(self, scope: Scope, headers: dict[str, str], body: bytes) -> dict[str, Any] | str:
        match = _AUTH.match(headers.get("authorization", ""))
        if match is None:
            return "Missing Authentication Token"
        key_id, day, region, service, signed, signature = match.groups()
        if key_id not in self.users or service != "execute-api":
            return "The security token included in the request is invalid."
        stamp = headers.get("x-amz-date", "")
        try:
            when = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
        except ValueError:
            return "invalid x-amz-date"
        if not stamp.startswith(day) or abs(datetime.datetime.now(datetime.UTC) - when) > MAX_SKEW:
            return "Signature expired"
        secret, arn = self.users[key_id]
        query = scope["query_string"].decode("latin-1")
        url = f"http://{headers['host']}{scope['raw_path'].decode('latin-1')}" + (f"?{query}" if query else "")
        request = AWSRequest(method=scope["method"], url=url, data=body,
                             headers={name: headers[name] for name in signed.split(";") if name in headers})
        request.context["timestamp"] = stamp
        auth = SigV4Auth(Credentials(key_id, secret, headers.get("x-amz-security-token")), service, region)
        expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
        if not hmac.compare_digest(expected, signature):
            return "The request signature we calculated does not match the signature you provided."
        return {"iam": {"accessKey": key_id, "accountId": arn.split(":")[4], "callerId": key_id,
                        "cognitoIdentity": None, "principalOrgId": None, "userArn": arn, "userId": key_id}}

    def jwt(self, headers: dict[str, str]) -> dict[str, Any] | str:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or token not in self.tokens:
            return "Unauthorized"
        return {"jwt": {"claims": self.tokens[token], "scopes": None}}


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"message": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
