"""The operator token read at run time from SSM Parameter Store (SecureString) and Secrets Manager, on a real
moto server: the value, the per-container cache and its TTL (a rotated token is picked up once the cached one
is old), one read for many concurrent requests, and a failed read that refuses (503) instead of opening up."""

from __future__ import annotations

import asyncio
import uuid

import boto3  # type: ignore[import-untyped]
import httpx
import pytest

from dormant.aws.secrets import operator_token
from dormant.errors import StorageError
from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.apps import registry
from tests.api.support import serve
from tests.servers import MotoServer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def endpoint(moto_server_process: MotoServer) -> str:
    return moto_server_process.endpoint


async def test_an_ssm_secure_string_is_read_once_per_ttl(endpoint: str) -> None:
    name = f"/dormant-{uuid.uuid4().hex[:8]}/inspector-token"
    ssm = boto3.client("ssm", endpoint_url=endpoint, region_name="us-east-1")
    ssm.put_parameter(Name=name, Type="SecureString", Value="first")
    assert ssm.get_parameter(Name=name)["Parameter"]["Value"] != "first"  # stored encrypted
    clock = Clock()
    token = operator_token(Settings(endpoint_url=endpoint, inspector_token_parameter=name, secret_cache_seconds=60),
                           clock=clock)
    assert token is not None
    assert await token() == "first"
    # many requests at once: one read
    assert set(await asyncio.gather(*(token() for _ in range(20)))) == {"first"}
    ssm.put_parameter(Name=name, Type="SecureString", Value="rotated", Overwrite=True)
    clock.now += 59
    assert await token() == "first"  # cached in this container
    clock.now += 2
    assert await token() == "rotated"
    assert token.fetches == 2


async def test_a_secrets_manager_secret_is_read_and_cached(endpoint: str) -> None:
    name = f"dormant-{uuid.uuid4().hex[:8]}-inspector-token"
    secrets = boto3.client("secretsmanager", endpoint_url=endpoint, region_name="us-east-1")
    arn = secrets.create_secret(Name=name, SecretString="from-secrets-manager")["ARN"]
    clock = Clock()
    token = operator_token(Settings(endpoint_url=endpoint, inspector_token_secret=arn, secret_cache_seconds=10),
                           clock=clock)
    assert token is not None and await token() == "from-secrets-manager"
    secrets.put_secret_value(SecretId=arn, SecretString="next")
    assert await token() == "from-secrets-manager"
    clock.now += 11
    assert await token() == "next" and token.fetches == 2


async def test_a_missing_secret_refuses_the_operator_routes_and_a_present_one_opens_them(endpoint: str) -> None:
    missing = Settings(endpoint_url=endpoint, auth_mode="none",
                       inspector_token_parameter=f"/missing-{uuid.uuid4().hex}")
    token = operator_token(missing)
    assert token is not None
    with pytest.raises(StorageError, match="could not read SSM parameter"):
        await token()
    name = f"/dormant-{uuid.uuid4().hex[:8]}/inspector-token"
    boto3.client("ssm", endpoint_url=endpoint, region_name="us-east-1").put_parameter(
        Name=name, Type="SecureString", Value="s3cret")
    present = missing.model_copy(update={"inspector_token_parameter": name})
    async with TestEnv(registry) as env:
        await env.client.get_or_create("account", ["a"]).send("deposit", {"amount": 1})
        await env.run_until_idle()
        for settings, expected in ((missing, {"s3cret": 503, "wrong": 503}), (present, {"s3cret": 200, "wrong": 401})):
            # (a hang guard, not a speed bound: the missing parameter's read is tried 3 times against a moto
            # server that a loaded machine may answer slowly; httpx's default is 5 s)
            async with serve(create_app(registry, settings, service=env.service)) as url, \
                    httpx.AsyncClient(base_url=url, timeout=60) as http:
                for presented, status in expected.items():
                    response = await http.get("/actors/account/a/history",
                                              headers={"Authorization": f"Bearer {presented}"})
                    assert response.status_code == status, (settings.inspector_token_parameter, presented)
                    if status == 503:
                        assert response.json()["error"]["code"] == "storage_unavailable"
                # no token at all: 401 without asking the secret store
                assert (await http.get("/actors/account/a/history")).status_code == 401
