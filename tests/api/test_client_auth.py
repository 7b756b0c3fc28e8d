"""The HTTP client authenticates as the API's auth mode needs: SigV4 (iam) and a bearer JWT (jwt), each
with the operator token beside it; and `curl --aws-sigv4` (the command docs/deploy.md shows) signs requests
the same gateway accepts. The gateway in front of the app is tests/api/gateway.py: it recomputes each
signature from the request as received, as API Gateway's AWS_IAM authorization does."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from botocore.credentials import Credentials  # type: ignore[import-untyped]

from dormant.http.app import create_app
from dormant.http.client import HttpClient, UnauthorizedError
from dormant.http.keys import encode_key
from dormant.http.signing import BearerToken, SigV4
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.gateway import Gateway
from tests.api.support import serve
from tests.api.vault_app import registry

KEY_ID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
ALICE = "arn:aws:iam::123456789012:user/alice"
OPERATOR = "operator-token"


@asynccontextmanager
async def gateway(mode: str, **options: Any) -> AsyncIterator[tuple[TestEnv, Gateway, str]]:
    settings = Settings(auth_mode=mode, inspector_token=OPERATOR)  # type: ignore[arg-type]
    async with TestEnv(registry) as env:
        front = Gateway(create_app(registry, settings, service=env.service), mode=mode, **options)
        async with serve(front) as url:  # type: ignore[arg-type]
            yield env, front, url


async def test_sigv4_signed_requests_pass_the_iam_authorizer_and_the_hook_sees_the_principal() -> None:
    users = {KEY_ID: (SECRET, ALICE), "AKIDMALLORY": ("mallory-secret", "arn:aws:iam::123456789012:user/mallory")}
    async with gateway("iam", users=users) as (env, front, url):
        signer = SigV4("us-east-1", credentials=Credentials(KEY_ID, SECRET))
        async with HttpClient(url, OPERATOR, registry=registry, auth=signer) as client:
            vault = client.get_or_create("vault", [ALICE])
            await vault.send("deposit", {"amount": 4}, message_id="dep-1")  # a header outside the default set
            await env.run_until_idle()
            assert (await vault.state()).senders == [f"iam:{ALICE}"]
            who = await vault.call("whoami")
            assert (who["kind"], who["id"]) == ("iam", ALICE)
            # the events long-poll and a query string are signed as sent
            assert [e.payload for e in [e async for e in vault.events(follow=False)]] == [{"balance": 4}]
            # the operator token rides beside the signature (X-Dormant-Operator-Token)
            assert [e.kind for e in await vault.history()][:1] == ["loop"]
        assert len(front.seen) >= 5 and all(s["iam"]["userArn"] == ALICE for s in front.seen)

        # a wrong secret, an unsigned client: refused by the gateway; a valid signer of someone else: the hook
        async with HttpClient(url, registry=registry, auth=SigV4("us-east-1", credentials=Credentials(
                KEY_ID, "not-the-secret")), retry=None) as forged:
            with pytest.raises(Exception, match="403") as refused:
                await forged.get_or_create("vault", [ALICE]).call("balance")
            assert "signature we calculated does not match" in str(refused.value)
        async with HttpClient(url, registry=registry, auth=SigV4("us-east-1", credentials=Credentials(
                "AKIDMALLORY", "mallory-secret"))) as mallory:
            from dormant import ForbiddenError

            with pytest.raises(ForbiddenError, match="mallory may not"):
                await mallory.get_or_create("vault", [ALICE]).call("balance")


async def test_a_bearer_jwt_passes_the_jwt_authorizer_with_the_operator_token_beside_it() -> None:
    tokens = {"jwt-alice-1": {"sub": "alice", "iss": "https://issuer", "client_id": "c"},
              "jwt-alice-2": {"sub": "alice", "iss": "https://issuer", "client_id": "c"}}
    issued = iter(["jwt-alice-1", "jwt-alice-2", "jwt-alice-2", "jwt-alice-2"])
    async with gateway("jwt", tokens=tokens) as (_, front, url):
        async with HttpClient(url, OPERATOR, registry=registry, auth=BearerToken(lambda: next(issued))) as client:
            vault = client.get_or_create("vault", ["alice"])
            assert await vault.call("balance") == 0
            assert (await vault.call("whoami"))["id"] == "alice"
            assert len(await vault.history()) >= 1  # the operator route: the JWT, and the token in its own header
        assert [s["jwt"]["claims"]["sub"] for s in front.seen] == ["alice", "alice", "alice"]
        async with HttpClient(url, registry=registry, auth=BearerToken("expired")) as stale:
            with pytest.raises(Exception, match="401"):
                await stale.get_or_create("vault", ["alice"]).call("balance")
        async with HttpClient(url, registry=registry, auth=BearerToken("jwt-alice-1")) as no_operator:
            with pytest.raises(UnauthorizedError):
                await no_operator.get_or_create("vault", ["alice"]).history()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_curl_aws_sigv4_signs_what_the_gateway_accepts() -> None:
    async with gateway("iam", users={KEY_ID: (SECRET, ALICE)}) as (env, _, url):
        base = f"{url}/actors/vault/{encode_key([ALICE])}"

        def curl(secret: str, *args: str) -> tuple[int, Any]:
            result = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "--aws-sigv4",
                                     "aws:amz:us-east-1:execute-api", "--user", f"{KEY_ID}:{secret}", *args],
                                    capture_output=True, text=True, timeout=30, check=False)
            body, _, status = result.stdout.rpartition("\n")
            return int(status), json.loads(body) if body else None

        created = await asyncio.to_thread(curl, SECRET, "-X", "PUT", base)
        assert created[0] == 201, created
        sent = await asyncio.to_thread(curl, SECRET, "-X", "POST", f"{base}/queues/deposit?wait=false",
                                       "-H", "content-type: application/json", "-d", '{"amount": 7}')
        assert sent[0] == 202, sent
        await env.run_until_idle()
        assert (await asyncio.to_thread(curl, SECRET, f"{base}/state"))[1]["senders"] == [f"iam:{ALICE}"]
        forged = await asyncio.to_thread(curl, "wrong", f"{base}/state")
        assert forged[0] == 403


async def test_the_cli_reaches_operator_routes_of_an_iam_or_jwt_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """`dormant --auth sigv4|jwt`: a deployed API authenticates every route, operator routes too, so the CLI signs
    with the caller's AWS credentials (or carries DORMANT_JWT) and sends the operator token beside it."""
    from dormant.cli.main import main

    users = {KEY_ID: (SECRET, ALICE)}
    async with gateway("iam", users=users) as (env, _, url):
        await env.client.get_or_create("vault", [ALICE]).call("balance")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        args = ["actors", "list", "--type", "vault", "--url", url, "--token", OPERATOR, "--json"]
        unsigned = await asyncio.to_thread(main, args)
        signed = await asyncio.to_thread(main, ["--auth", "sigv4", *args])
        assert (unsigned, signed) == (2, 0)  # the gateway refuses an unsigned CLI; a signed one is served
    async with gateway("jwt", tokens={"jwt-ops": {"sub": "ops", "iss": "https://issuer"}}) as (env, _, url):
        await env.client.get_or_create("vault", ["ops"]).call("balance")
        monkeypatch.setenv("DORMANT_JWT", "jwt-ops")
        args = ["history", "show", "vault", "ops", "--url", url, "--token", OPERATOR]
        assert await asyncio.to_thread(main, ["--auth", "jwt", *args]) == 0
        monkeypatch.delenv("DORMANT_JWT")
        assert await asyncio.to_thread(main, ["--auth", "jwt", *args]) == 2  # says DORMANT_JWT is needed
