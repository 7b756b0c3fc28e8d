"""How the HTTP client proves who it is: AWS SigV4 (auth mode `iam`) or a bearer JWT (auth mode `jwt`).

    HttpClient(url, auth=SigV4())                          # credentials as boto3 finds them, region from the URL
    HttpClient(url, auth=BearerToken(lambda: fetch_jwt()))  # a fresh token per request (or a fixed string)

Both are `httpx.Auth`, so they work with any httpx client too. SigV4 signs for the `execute-api` service what
API Gateway checks: method, path, query, body hash, and the headers `host`, `content-type`,
`idempotency-key`, `x-dormant-operator-token`, `x-amz-date` (and `x-amz-security-token` with temporary
credentials). Headers a proxy may rewrite (connection, user-agent, accept-encoding) are left unsigned.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Generator
from typing import Any

import httpx
from botocore.auth import SigV4Auth, SigV4QueryAuth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.session import get_session  # type: ignore[import-untyped]

from dormant.http.headers import OPERATOR_HEADER

SIGNED_HEADERS = ("host", "content-type", "idempotency-key", OPERATOR_HEADER)
_REGION_IN_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")


class SigV4(httpx.Auth):
    """Signs each request (each retry anew) with AWS Signature Version 4 for API Gateway's AWS_IAM routes."""

    requires_request_body = True

    def __init__(self, region: str | None = None, *, credentials: Any = None, service: str = "execute-api") -> None:
        """`credentials`: botocore credentials (default: boto3's chain: environment, profile, role);
        `region`: default from an `execute-api` URL, then AWS_REGION / AWS_DEFAULT_REGION."""
        self.region = region
        self.service = service
        self._credentials = credentials

    def credentials(self) -> Any:
        source = self._credentials if self._credentials is not None else get_session().get_credentials()
        if source is None:
            raise RuntimeError("no AWS credentials found for SigV4 (environment, profile or role)")
        return source.get_frozen_credentials() if hasattr(source, "get_frozen_credentials") else source

    def region_for(self, url: httpx.URL) -> str:
        if self.region:
            return self.region
        match = _REGION_IN_HOST.search(url.host)
        region = match.group(1) if match else os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not region:
            raise RuntimeError(f"cannot tell the AWS region of {url.host}: pass SigV4(region=...)")
        return region

    def sign(self, request: httpx.Request) -> None:
        headers = {name: request.headers[name] for name in SIGNED_HEADERS if name in request.headers}
        aws = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=headers)
        SigV4Auth(self.credentials(), self.service, self.region_for(request.url)).add_auth(aws)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if name in aws.headers:
                request.headers[name] = aws.headers[name]

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        self.sign(request)
        yield request

    def presign(self, url: str, expires: int = 300) -> str:
        """A WebSocket URL (`wss://...`) signed in its query, as the WebSocket API's AWS_IAM `$connect` checks it (a
        browser or a WebSocket library cannot sign the handshake's headers); valid `expires` seconds."""
        scheme, rest = url.split("://", 1)
        https = ("https" if scheme in ("wss", "https") else "http") + "://" + rest
        aws = AWSRequest(method="GET", url=https)
        SigV4QueryAuth(self.credentials(), self.service, self.region_for(httpx.URL(https)),
                       expires=expires).add_auth(aws)
        return f"{scheme}://{str(aws.url).split('://', 1)[1]}"


class BearerToken(httpx.Auth):
    """`Authorization: Bearer <token>`; the token may be a callable, asked for each request (refresh it there)."""

    def __init__(self, token: str | Callable[[], str]) -> None:
        self._token = token

    def token(self) -> str:
        """The token now (a WebSocket handshake carries it too: docs/realtime.md)."""
        return self._token() if callable(self._token) else self._token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        yield request
