"""The WebSocket `$connect` authorizer of auth mode jwt (dormant.aws.authorizer, docs/realtime.md): tokens signed
with a locally made RSA key and served as a JWKS through a stub of the issuer's discovery documents."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey
from starlette.requests import Request

from dormant.aws.authorizer import JwtVerifier, LambdaAuthorizer, TokenRefused, Unauthorized, token_of, verifier_of
from dormant.aws.realtime import websocket_caller
from dormant.http.identity import request_caller
from dormant.settings import Settings

ISSUER = "https://issuer.example/pool"
AUDIENCE = "dormant-app"
NOW = 1_800_000_000
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
OTHER = RSAKey.generate_key(2048, parameters={"kid": "k1"})  # same key id, another key


class Issuer:
    """The issuer's /.well-known/openid-configuration and JWKS, counting fetches."""

    def __init__(self, *keys: RSAKey) -> None:
        self.keys = list(keys)
        self.fetched: list[str] = []

    def __call__(self, url: str) -> Any:
        self.fetched.append(url)
        if url == f"{ISSUER}/.well-known/openid-configuration":
            return {"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks.json"}
        assert url == f"{ISSUER}/jwks.json"
        return KeySet(self.keys).as_dict(private=False)


def token(key: Any = KEY, *, alg: str = "RS256", kid: str | None = "k1", **claims: Any) -> str:
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "user-1", "exp": NOW + 600, "iat": NOW - 5,
            "scope": "notes/read notes/write", **claims}
    header = {"alg": alg, **({"kid": kid} if kid else {})}
    return jwt.encode(header, {k: v for k, v in body.items() if v is not None}, key)


def verifier(issuer: Issuer | None = None, clock: list[float] | None = None) -> JwtVerifier:
    moments = clock or [float(NOW)]
    return JwtVerifier(ISSUER, {AUDIENCE}, fetch=issuer or Issuer(KEY), clock=lambda: moments[0])


def refused(check: JwtVerifier, value: str) -> str:
    with pytest.raises(TokenRefused) as caught:
        check.caller_claims(value)
    return caught.value.reason


def test_a_good_token_gives_its_claims_shaped_as_api_gateway_passes_them() -> None:
    issuer = Issuer(KEY)
    claims = verifier(issuer).caller_claims(token(groups=["a", "b"], email_verified=True))
    assert claims["sub"] == "user-1" and claims["iss"] == ISSUER and claims["aud"] == AUDIENCE
    assert claims["exp"] == str(NOW + 600) and claims["groups"] == "[a b]" and claims["email_verified"] == "true"
    assert issuer.fetched == [f"{ISSUER}/.well-known/openid-configuration", f"{ISSUER}/jwks.json"]


@pytest.mark.parametrize(("case", "value", "reason"), [
    ("another key's signature", lambda: token(OTHER), "bad_signature"),
    ("another issuer", lambda: token(iss="https://evil.example"), "wrong_issuer"),
    ("another audience", lambda: token(aud="someone-else"), "wrong_audience"),
    ("expired", lambda: token(exp=NOW - 1), "expired"),
    ("not yet valid", lambda: token(nbf=NOW + 60), "not_yet_valid"),
    ("no subject", lambda: token(sub=None), "missing_sub"),
    ("no expiry", lambda: token(exp=None), "missing_exp"),
    ("HS256 keyed with the public key", lambda: token(OctKey.import_key(b"k" * 32), alg="HS256"),
     "algorithm_not_allowed"),
    ("garbage", lambda: "not-a-token", "malformed"),
    ("garbage with dots", lambda: "a.b.c", "malformed"),
])
def test_a_bad_token_is_refused_with_a_named_reason(case: str, value: Any, reason: str) -> None:
    assert refused(verifier(), value()) == reason, case


def test_alg_none_is_refused() -> None:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": NOW + 60}
    unsigned = f"{part({'alg': 'none', 'kid': 'k1'})}.{part(claims)}."
    assert refused(verifier(), unsigned) == "algorithm_not_allowed"


def test_a_key_id_not_in_the_jwks_fetches_it_again_at_most_every_30_seconds() -> None:
    issuer = Issuer(KEY)
    clock = [float(NOW)]
    check = verifier(issuer, clock)
    check.caller_claims(token())
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2"})
    assert refused(check, token(rotated, kid="k2")) == "unknown_key"  # fetched again: still not there
    assert check.fetches == 1  # (the first fetch is under 30 s old: no refetch yet)
    clock[0] += 31
    issuer.keys.append(rotated)  # the issuer rotated its keys
    assert check.caller_claims(token(rotated, kid="k2", exp=NOW + 600))["sub"] == "user-1"
    assert check.fetches == 2
    assert refused(check, token(RSAKey.generate_key(2048, parameters={"kid": "k3"}), kid="k3")) == "unknown_key"
    assert check.fetches == 2  # a burst of unknown ids does not hammer the issuer


def test_an_unreachable_jwks_refuses_tokens() -> None:
    def down(url: str) -> Any:
        raise OSError("connection refused")

    assert refused(JwtVerifier(ISSUER, {AUDIENCE}, fetch=down, clock=lambda: NOW), token()) == "jwks_unavailable"


def test_the_token_comes_from_the_authorization_header_or_the_token_query_parameter() -> None:
    assert token_of({"authorization": "Bearer abc"}, {"token": "q"}) == "abc"
    assert token_of({"Authorization": "bearer abc"}, None) == "abc"
    assert token_of({"Authorization": "Basic abc"}, {"token": "q"}) == "q"
    assert token_of(None, None) is None and token_of({}, {"token": ""}) is None


def connect_event(headers: dict[str, str] | None = None, query: dict[str, str] | None = None) -> dict[str, Any]:
    """A WebSocket API's `$connect` REQUEST authorizer event (the fields AWS sends)."""
    return {"type": "REQUEST", "methodArn": "arn:aws:execute-api:us-east-1:123456789012:abc123/dev/$connect",
            "headers": {"Host": "abc123.execute-api.us-east-1.amazonaws.com", "Sec-WebSocket-Version": "13",
                        **(headers or {})},
            "multiValueHeaders": {}, "queryStringParameters": query, "multiValueQueryStringParameters": {},
            "stageVariables": {},
            "requestContext": {"routeKey": "$connect", "eventType": "CONNECT", "stage": "dev",
                               "connectionId": "L0SM9cOFvHcCIhw=", "apiId": "abc123", "domainName":
                               "abc123.execute-api.us-east-1.amazonaws.com", "requestId": "r-1"}}


def test_the_handler_allows_connect_with_the_claims_and_the_connect_route_makes_the_http_apis_caller() -> None:
    authorizer = LambdaAuthorizer(verifier())
    answer = authorizer(connect_event(query={"token": token(email="ada@example.com")}))
    assert answer["principalId"] == "user-1"
    [statement] = answer["policyDocument"]["Statement"]
    assert statement == {"Action": "execute-api:Invoke", "Effect": "Allow",
                         "Resource": "arn:aws:execute-api:us-east-1:123456789012:abc123/dev/$connect"}
    assert all(isinstance(v, str) for v in answer["context"].values())  # a Lambda authorizer's context is flat
    settings = Settings(auth_mode="jwt", jwt_issuer=ISSUER, jwt_audience=AUDIENCE)  # type: ignore[call-arg]
    # API Gateway hands the context to the $connect integration under requestContext.authorizer
    caller = websocket_caller({"authorizer": {**answer["context"], "principalId": "user-1"}}, settings)
    claims = json.loads(answer["context"]["claims"])
    http = request_caller(Request({"type": "http", "headers": [], "aws.event": {
        "requestContext": {"authorizer": {"jwt": {"claims": claims, "scopes": None}}}}}), settings)
    assert caller == http
    assert caller is not None and caller.kind == "jwt" and caller.id == "user-1"
    assert caller.scopes == ("notes/read", "notes/write") and caller.claim("email") == "ada@example.com"
    assert websocket_caller({"authorizer": {}}, settings) is None  # no authorizer context: refused


def test_a_refused_connect_is_unauthorized_with_its_reason_logged_and_no_token(
        caplog: pytest.LogCaptureFixture) -> None:
    authorizer = LambdaAuthorizer(verifier())
    expired = token(exp=NOW - 1)
    with caplog.at_level(logging.INFO, logger="dormant.aws.authorizer"):
        with pytest.raises(Unauthorized, match=r"^Unauthorized$"):
            authorizer(connect_event(headers={"Authorization": f"Bearer {expired}"}))
        with pytest.raises(Unauthorized):
            authorizer(connect_event())
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "expired" in logged and "no_token" in logged
    assert expired not in logged and expired.split(".")[1] not in logged


def test_the_verifier_of_the_settings_needs_an_issuer_and_an_audience() -> None:
    with pytest.raises(RuntimeError, match="DORMANT_JWT_ISSUER"):
        verifier_of(Settings(auth_mode="jwt"))  # type: ignore[call-arg]
    made = verifier_of(Settings(auth_mode="jwt", jwt_issuer=ISSUER, jwt_audience="a, b"))  # type: ignore[call-arg]
    assert made.issuer == ISSUER and made.audiences == {"a", "b"}
