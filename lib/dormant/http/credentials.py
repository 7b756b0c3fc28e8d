"""The operator credential of the HTTP API: the operator (inspector) token.

It guards the history, inspector and export routes, `status?history=true` and the operator routes
(dormant.http.operator), after the caller's identity (dormant.http.identity: in iam/jwt mode those routes, like
every other, need API Gateway's verified caller first): `X-Dormant-Operator-Token: <token>` beside the SigV4
signature or the JWT in Authorization, or `Authorization: Bearer <token>` where that header is free (auth mode
`none`). It comes from a token source: a fixed value (`DORMANT_INSPECTOR_TOKEN`,
dev and tests) or SSM / Secrets Manager read at run time (dormant.aws.secrets). Compared in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from starlette.requests import Request

from dormant.http.errors import ApiError
from dormant.http.headers import OPERATOR_HEADER  # not .signing: that is the client's (httpx)
from dormant.settings import Settings

TokenSource = Callable[[], Awaitable[str | None]]


def static_token(value: str | None) -> TokenSource:
    async def token() -> str | None:
        return value
    return token


def token_source(settings: Settings) -> TokenSource:
    """Where the settings say the operator token is: a fixed value, or SSM / Secrets Manager (read lazily)."""
    if settings.inspector_token is not None:
        return static_token(settings.inspector_token.get_secret_value())
    if settings.inspector_token_parameter or settings.inspector_token_secret:
        from dormant.aws.secrets import operator_token  # only deployed APIs need the AWS clients

        cached = operator_token(settings)
        assert cached is not None

        async def read() -> str | None:
            return await cached()
        return read
    return static_token(None)


def _presented(request: Request) -> str | None:
    own = request.headers.get(OPERATOR_HEADER)
    if own is not None:
        return own.strip()
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


async def require_operator(request: Request, settings: Settings, source: TokenSource) -> None:
    """401 unless the request presents the operator token (dev mode: always allowed)."""
    if settings.dev:
        return
    presented = _presented(request)
    if presented is None:
        raise ApiError(401, "unauthorized", "this route needs the operator token as a bearer token (Authorization: "
                                            f"Bearer <token>, or {OPERATOR_HEADER} next to a SigV4 or JWT "
                                            "Authorization)",
                       headers={"WWW-Authenticate": "Bearer"})
    expected = await source()  # StorageError (503) when the secret store cannot be read: never open
    if expected is None:
        raise ApiError(401, "unauthorized", "this route needs an operator token, and none is configured (set "
                                            "DORMANT_INSPECTOR_TOKEN_PARAMETER, or DORMANT_DEV=1 locally)",
                       headers={"WWW-Authenticate": "Bearer"})
    if not hmac.compare_digest(presented.encode(), expected.encode()):
        raise ApiError(401, "unauthorized", "wrong bearer token (the operator token)",
                       headers={"WWW-Authenticate": "Bearer"})
