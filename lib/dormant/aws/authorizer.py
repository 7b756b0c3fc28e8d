"""The WebSocket API's `$connect` in auth mode `jwt` (docs/realtime.md): a Lambda REQUEST authorizer that checks a
bearer token as API Gateway's JWT authorizer checks the HTTP API's.

An API Gateway WebSocket API has no JWT authorizer, so this function does its work: the token's signature against
the issuer's JWKS (found as API Gateway finds it: `<issuer>/.well-known/openid-configuration`'s `jwks_uri`; kept per
container and fetched again for a key id it does not hold, at most every REFETCH_SECONDS), an RSA algorithm (API
Gateway's JWT authorizer accepts only those; `none` never), `iss`, `aud` or `client_id` among the audiences,
`exp` and `nbf`. It allows the `$connect` route with the token's claims in the context (shaped as API Gateway
hands an HTTP API's claims over: dormant.core.claims), from which the `$connect` handler makes the caller with the
same rule as the HTTP API (dormant.core.claims.caller_from_claims). A refused token is 401 (`Unauthorized`, as the
HTTP API's authorizer answers) and its reason is logged, never the token.

Where the token comes from (browsers cannot set headers on a WebSocket handshake): `Authorization: Bearer <token>`,
else the query parameter `token` (`wss://.../<stage>?token=<token>`). The WebSocket stage's access log records no
query string (template.yaml, infra/realtime.tf); a proxy in front of it might: prefer the header where the client
can set one.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    InvalidKeyIdError,
    JoseError,
    MissingClaimError,
    UnsupportedAlgorithmError,
)
from joserfc.jwk import KeySet

from dormant.core.claims import CLAIMS_CONTEXT, ClaimsRefused, caller_from_claims, gateway_claims
from dormant.settings import Settings

log = logging.getLogger("dormant.aws.authorizer")

ALGORITHMS = ("RS256", "RS384", "RS512")  # API Gateway's JWT authorizer: RSA only
TOKEN_PARAM = "token"
JWKS_TTL_SECONDS = 3600.0
REFETCH_SECONDS = 30.0  # an unknown key id fetches the JWKS again, at most this often (key rotation, not abuse)
FETCH_TIMEOUT_SECONDS = 3.0
MAX_TOKEN_CHARS = 16 * 1024
MAX_DOCUMENT_BYTES = 1024 * 1024  # an openid-configuration or a JWKS

Fetch = Callable[[str], Any]
"""GET a URL, its JSON."""


class TokenRefused(Exception):
    """A token that does not pass: `reason` is a short name for the logs (the token is never quoted)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def fetch_json(url: str) -> Any:
    """GET with the standard library (the functions' layer leaves httpx out); an HTTP error raises."""
    if not url.startswith(("https://", "http://")):
        raise ValueError("the issuer's URLs must be http(s)")
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_SECONDS) as response:
        body = response.read(MAX_DOCUMENT_BYTES + 1)
    if len(body) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"{url} answered over {MAX_DOCUMENT_BYTES} bytes")
    return json.loads(body)


class JwtVerifier:
    """Checks bearer tokens of one issuer and its audiences (see the module docstring); thread-safe."""

    def __init__(self, issuer: str, audiences: Iterable[str], *, jwks_url: str | None = None,
                 fetch: Fetch = fetch_json, clock: Callable[[], float] = time.time, leeway: int = 0) -> None:
        self.issuer = issuer
        self.audiences = frozenset(audiences)
        self.jwks_url = jwks_url
        self.fetch = fetch
        self.clock = clock
        self.leeway = leeway
        self.fetches = 0
        self._keys: KeySet | None = None
        self._fetched_at = 0.0
        self._lock = threading.Lock()

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims (as signed); TokenRefused otherwise."""
        if not token or len(token) > MAX_TOKEN_CHARS or token.count(".") != 2:
            raise TokenRefused("malformed")
        keys = self._key_set(refresh=False)
        try:
            decoded = self._decode(token, keys)
        except InvalidKeyIdError:
            keys = self._key_set(refresh=True)  # rotated keys: fetched again (rate-limited)
            try:
                decoded = self._decode(token, keys)
            except InvalidKeyIdError:
                raise TokenRefused("unknown_key") from None
        claims = decoded.claims
        registry = jwt.JWTClaimsRegistry(now=int(self.clock()), leeway=self.leeway,
                                         iss={"essential": True, "value": self.issuer},
                                         exp={"essential": True}, sub={"essential": True})
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise TokenRefused("expired") from None
        except MissingClaimError as error:  # (error.claim: the missing names, comma-separated)
            raise TokenRefused("missing_" + error.claim.replace(",", "_")) from None
        except InvalidClaimError as error:
            reason = {"iss": "wrong_issuer", "nbf": "not_yet_valid", "exp": "expired", "sub": "no_subject",
                      "iat": "issued_in_future"}.get(error.claim, f"invalid_{error.claim}")
            raise TokenRefused(reason) from None
        return claims

    def caller_claims(self, token: str) -> dict[str, str]:
        """The verified token's claims as API Gateway hands an HTTP API's over (strings), after the audience and
        subject rule every jwt caller follows (dormant.core.claims); TokenRefused otherwise."""
        claims = gateway_claims(self.verify(token))
        try:
            caller_from_claims(claims, issuer=self.issuer, audiences=self.audiences)
        except ClaimsRefused as refused:
            raise TokenRefused(refused.reason) from None
        return claims

    def _decode(self, token: str, keys: KeySet) -> jwt.Token:
        try:
            return jwt.decode(token, keys, algorithms=list(ALGORITHMS))
        except InvalidKeyIdError:
            raise
        except BadSignatureError:
            raise TokenRefused("bad_signature") from None
        except UnsupportedAlgorithmError:
            raise TokenRefused("algorithm_not_allowed") from None
        except (JoseError, ValueError, TypeError):
            raise TokenRefused("malformed") from None

    def _key_set(self, *, refresh: bool) -> KeySet:
        with self._lock:
            now = self.clock()
            stale = self._keys is None or now - self._fetched_at > JWKS_TTL_SECONDS
            if stale or (refresh and now - self._fetched_at > REFETCH_SECONDS):
                try:
                    url = self.jwks_url or self._discover()
                    self._keys = KeySet.import_key_set(self.fetch(url))
                    self._fetched_at = now
                    self.fetches += 1
                except Exception as error:
                    if self._keys is None:
                        log.warning("the issuer's JWKS cannot be read: %r", error)
                        raise TokenRefused("jwks_unavailable") from None
                    log.warning("the issuer's JWKS cannot be read again (the held keys stay): %r", error)
            assert self._keys is not None
            return self._keys

    def _discover(self) -> str:
        document = self.fetch(self.issuer.rstrip("/") + "/.well-known/openid-configuration")
        url = document.get("jwks_uri") if isinstance(document, dict) else None
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise ValueError("the issuer's openid-configuration has no jwks_uri")
        self.jwks_url = url
        return url


def token_of(headers: Mapping[str, Any] | None, query: Mapping[str, Any] | None) -> str | None:
    """The bearer token of a `$connect`: `Authorization: Bearer`, else the `token` query parameter."""
    for name, value in (headers or {}).items():
        if name.lower() == "authorization" and isinstance(value, str):
            scheme, _, credentials = value.strip().partition(" ")
            if scheme.lower() == "bearer" and credentials.strip():
                return credentials.strip()
    value = (query or {}).get(TOKEN_PARAM)
    return value if isinstance(value, str) and value else None


def verifier_of(settings: Settings, **options: Any) -> JwtVerifier:
    """The verifier of the deployment's issuer and audiences (DORMANT_JWT_ISSUER, DORMANT_JWT_AUDIENCE)."""
    if not settings.jwt_issuer or not settings.jwt_audiences():
        raise RuntimeError("auth mode jwt needs DORMANT_JWT_ISSUER and DORMANT_JWT_AUDIENCE")
    return JwtVerifier(settings.jwt_issuer, settings.jwt_audiences(), **options)


class Unauthorized(Exception):
    """Raised as API Gateway's authorizer contract asks: its message `Unauthorized` makes the answer 401."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


class LambdaAuthorizer:
    """The `$connect` REQUEST authorizer: an Allow policy for the connect route with the claims in the context, or
    Unauthorized (401)."""

    def __init__(self, verifier: JwtVerifier) -> None:
        self.verifier = verifier

    def __call__(self, event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
        token = token_of(event.get("headers"), event.get("queryStringParameters"))
        try:
            if token is None:
                raise TokenRefused("no_token")
            claims = self.verifier.caller_claims(token)
        except TokenRefused as refused:
            log.info("$connect refused: %s", refused.reason)
            raise Unauthorized() from None
        return {"principalId": claims["sub"],
                "policyDocument": {"Version": "2012-10-17", "Statement": [
                    {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": str(event["methodArn"])}]},
                "context": {CLAIMS_CONTEXT: json.dumps(claims, separators=(",", ":"))}}
