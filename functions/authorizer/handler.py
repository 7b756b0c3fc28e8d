"""Authorizer Lambda entry point (auth mode jwt): the WebSocket API's `$connect` REQUEST authorizer
(dormant.aws.authorizer, docs/realtime.md).

It checks the bearer token (`Authorization: Bearer`, else `?token=`) against DORMANT_JWT_ISSUER's JWKS (kept for the
container's life) and DORMANT_JWT_AUDIENCE, and allows the route with the claims in the context, or answers 401.
It reads nothing of the stack (no table, queue or registry): its role may only write its logs.
"""

from __future__ import annotations

from dormant.aws.authorizer import LambdaAuthorizer, verifier_of
from dormant.aws.telemetry import lambda_telemetry
from dormant.settings import Settings

telemetry = lambda_telemetry("dormant-authorizer")
authorizer = LambdaAuthorizer(verifier_of(Settings()))  # its JWKS is kept for the container's life
handler = telemetry.handler(authorizer)
