"""A verified JWT's claims -> the Caller: one rule for the HTTP API (API Gateway's JWT authorizer verified the token,
dormant.http.identity) and the WebSocket API's `$connect` (Dormant's Lambda authorizer verified it,
dormant.aws.authorizer). No I/O.

API Gateway hands an HTTP API's claims over as strings (a list as "[a b]"); `gateway_claims` gives a token's
claims that same shape, so a caller is the same whichever route it came through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from dormant.workflow.caller import Caller

CLAIMS_CONTEXT = "claims"
"""The `$connect` authorizer's context key holding the claims (JSON: a Lambda authorizer's context is flat)."""


class ClaimsRefused(Exception):
    """The claims do not make a caller: `reason` names why (never quoting the token)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def words(value: Any) -> set[str]:
    """A claim API Gateway passed as a string ("a b", "[a b]") or a list, as a set of values."""
    if isinstance(value, list):
        return {str(item) for item in value}
    if isinstance(value, str):
        return {part for part in re.split(r"[\s,\[\]]+", value) if part}
    return set()


def gateway_claims(claims: Mapping[str, Any]) -> dict[str, str]:
    """A token's claims as API Gateway's JWT authorizer passes them: strings, a list as "[a b]"."""
    shaped: dict[str, str] = {}
    for name, value in claims.items():
        if isinstance(value, list):
            shaped[name] = "[" + " ".join(str(item) for item in value) + "]"
        elif isinstance(value, bool):
            shaped[name] = "true" if value else "false"
        elif isinstance(value, dict):
            shaped[name] = json.dumps(value, separators=(",", ":"))
        elif value is not None:
            shaped[name] = str(value)
    return shaped


def caller_from_claims(claims: Any, scopes: Any = None, *, issuer: str | None,
                       audiences: Iterable[str]) -> Caller:
    """The `jwt` caller of verified claims; ClaimsRefused without a subject, or when the issuer or the audience
    (`aud` or Cognito's `client_id`) is not one this API trusts (a route left without its authorizer by mistake is
    then still refused)."""
    if not isinstance(claims, Mapping) or not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise ClaimsRefused("no_subject", "no verified JWT with a subject (sub)")
    if issuer and claims.get("iss") != issuer:
        raise ClaimsRefused("wrong_issuer", "the token's issuer is not the one this API trusts")
    trusted = set(audiences)
    if trusted and not trusted & (words(claims.get("aud")) | words(claims.get("client_id"))):
        raise ClaimsRefused("wrong_audience", "the token is not meant for this API (audience)")
    found = list(scopes) if isinstance(scopes, list) else []
    for name in ("scope", "scp"):
        found += sorted(words(claims.get(name)))
    return Caller(kind="jwt", id=claims["sub"], claims=dict(claims),
                  scopes=tuple(dict.fromkeys(str(scope) for scope in found)))
