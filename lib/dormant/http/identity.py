"""Who is calling: the identity API Gateway verified, read from the request context Mangum hands over.

Mangum puts the Lambda event in the ASGI scope (`scope["aws.event"]`). With the deploy-time auth mode
(`DORMANT_AUTH_MODE`, docs/deploy.md):

- `iam`: API Gateway checked a SigV4 signature (AWS_IAM authorization); the principal is in
  `requestContext.authorizer.iam` (HTTP API, payload 2.0) or `requestContext.identity` (REST API, 1.0).
- `jwt`: API Gateway's JWT authorizer checked the token's signature, issuer, audience and expiry; the claims are
  in `requestContext.authorizer.jwt.claims` (HTTP API) or `requestContext.authorizer.claims` (REST API with a
  Cognito authorizer). When `DORMANT_JWT_ISSUER` / `DORMANT_JWT_AUDIENCE` are set, the claims must match them
  too (a route left without the authorizer by mistake is then still refused).
- `none`: nobody is authenticated; every caller is `anonymous` (demos only).

In dev mode (`dormant dev`) a request without a request context is the dev user (`X-Dormant-Dev-User` names
another one, to try an authorization hook locally). Anything else without a verified identity is 401: the
app never trusts an identity a client could have written itself (headers, query, body).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request

from dormant.core.claims import ClaimsRefused, caller_from_claims
from dormant.http.errors import ApiError
from dormant.settings import Settings
from dormant.workflow.caller import Caller

DEV_USER_HEADER = "x-dormant-dev-user"
DEV_USER = "dev"
_IAM_FIELDS = {"accountId": "accountId", "userArn": "userArn", "userId": "userId", "callerId": "callerId",
               "principalOrgId": "principalOrgId", "caller": "callerId", "user": "userId"}
_MAX_DEV_USER = 128


def request_caller(request: Request, settings: Settings) -> Caller:
    """The caller of `request` under the settings' auth mode; ApiError 401 when there is none."""
    event = request.scope.get("aws.event")
    context = event.get("requestContext") if isinstance(event, Mapping) else None
    mode = settings.auth_mode
    if settings.dev:  # the verified identity when there is one, else the dev user
        if isinstance(context, Mapping) and mode != "none":
            try:
                return _verified_caller(context, settings)
            except ApiError:
                pass
        return _dev_caller(request)
    if mode == "none":
        return Caller(kind="anonymous", id="anonymous")
    if not isinstance(context, Mapping):
        raise _unauthorized(mode, "the request did not come through API Gateway (no request context)")
    return _verified_caller(context, settings)


def _verified_caller(context: Mapping[str, Any], settings: Settings) -> Caller:
    return _iam_caller(context) if settings.auth_mode == "iam" else _jwt_caller(context, settings)


def _dev_caller(request: Request) -> Caller:
    name = request.headers.get(DEV_USER_HEADER, DEV_USER).strip()
    if not name or len(name) > _MAX_DEV_USER or not name.isprintable():
        raise ApiError(400, "bad_request", f"{DEV_USER_HEADER} must be 1 to {_MAX_DEV_USER} printable characters")
    return Caller(kind="dev", id=name)


def _iam_caller(context: Mapping[str, Any]) -> Caller:
    authorizer = context.get("authorizer")
    principal = authorizer.get("iam") if isinstance(authorizer, Mapping) else None
    if not isinstance(principal, Mapping):  # REST API (payload 1.0): the signer is in `identity`
        identity = context.get("identity")
        principal = identity if isinstance(identity, Mapping) and identity.get("userArn") else None
    arn = principal.get("userArn") if principal is not None else None
    if not isinstance(arn, str) or not arn.startswith("arn:"):
        raise _unauthorized("iam", "no IAM principal in the request context: sign the request with SigV4 "
                                   "(the route needs AWS_IAM authorization)")
    assert principal is not None
    claims = {name: str(principal[key]) for key, name in _IAM_FIELDS.items()
              if isinstance(principal.get(key), str | int) and principal.get(key) != ""}
    return Caller(kind="iam", id=arn, claims=claims)


def _jwt_caller(context: Mapping[str, Any], settings: Settings) -> Caller:
    authorizer = context.get("authorizer")
    claims: Any = None
    scopes: Any = None
    if isinstance(authorizer, Mapping):
        jwt = authorizer.get("jwt")
        if isinstance(jwt, Mapping):  # HTTP API (payload 2.0)
            claims, scopes = jwt.get("claims"), jwt.get("scopes")
        else:  # REST API (1.0) with a Cognito user pool authorizer
            claims = authorizer.get("claims")
    try:
        return caller_from_claims(claims, scopes, issuer=settings.jwt_issuer, audiences=settings.jwt_audiences())
    except ClaimsRefused as refused:
        if refused.reason == "no_subject":
            raise _unauthorized("jwt", "no verified JWT in the request context: send Authorization: Bearer <token> "
                                       "(the route needs the JWT authorizer)") from None
        raise _unauthorized("jwt", str(refused)) from None


def _unauthorized(mode: str, message: str) -> ApiError:
    headers = {"WWW-Authenticate": "Bearer"} if mode == "jwt" else None
    return ApiError(401, "unauthorized", message, headers=headers)
