"""Secrets read at run time: the operator (inspector) token from SSM Parameter Store or Secrets Manager.

The token never sits in an environment variable or in a deployment's state: the API function's environment
names the parameter (`DORMANT_INSPECTOR_TOKEN_PARAMETER`, a SecureString) or the secret
(`DORMANT_INSPECTOR_TOKEN_SECRET`), its role may read just that one, and each container keeps the value for
`secret_cache_seconds` (a rotated token reaches every container within that time). A read that fails is a
StorageError (HTTP 503): operator routes then refuse, they never open up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from dormant.aws.clients import open_client
from dormant.errors import StorageError
from dormant.settings import Settings

Fetch = Callable[[], Awaitable[str]]
# A secret read sits in front of an operator request: fail fast rather than hold the request.
ATTEMPTS, CONNECT_TIMEOUT, READ_TIMEOUT = 3, 2.0, 5.0


class CachedSecret:
    """A secret value fetched on first use and again once it is `ttl` seconds old (one fetch at a time)."""

    def __init__(self, fetch: Fetch, ttl: float, *, what: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch = fetch
        self._ttl = ttl
        self._clock = clock
        self._value: str | None = None
        self._fetched_at = 0.0
        self._lock: asyncio.Lock | None = None
        self.what = what
        self.fetches = 0

    async def __call__(self) -> str:
        if self._fresh():
            assert self._value is not None
            return self._value
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self._fresh():
                try:
                    value = await self._fetch()
                except (ClientError, BotoCoreError, KeyError) as error:
                    raise StorageError(f"could not read {self.what}: {type(error).__name__}: {error}") from None
                if not value:
                    raise StorageError(f"{self.what} is empty")
                self._value, self._fetched_at = value, self._clock()
                self.fetches += 1
        assert self._value is not None
        return self._value

    def _fresh(self) -> bool:
        return self._value is not None and self._clock() - self._fetched_at < self._ttl


def ssm_parameter(settings: Settings, name: str) -> Fetch:
    """Reads an SSM parameter's decrypted value (a SecureString, or a plain String)."""
    async def fetch() -> str:
        async with open_client("ssm", settings, attempts=ATTEMPTS, connect_timeout=CONNECT_TIMEOUT,
                               read_timeout=READ_TIMEOUT) as ssm:
            response = await ssm.get_parameter(Name=name, WithDecryption=True)
        return str(response["Parameter"]["Value"])
    return fetch


def secrets_manager_secret(settings: Settings, secret_id: str) -> Fetch:
    """Reads a Secrets Manager secret's current string value."""
    async def fetch() -> str:
        async with open_client("secretsmanager", settings, attempts=ATTEMPTS, connect_timeout=CONNECT_TIMEOUT,
                               read_timeout=READ_TIMEOUT) as client:
            response = await client.get_secret_value(SecretId=secret_id)
        return str(response["SecretString"])
    return fetch


def operator_token(settings: Settings, *, clock: Callable[[], float] = time.monotonic) -> CachedSecret | None:
    """The operator token the settings point at (None when they name no parameter or secret)."""
    if settings.inspector_token_parameter:
        return CachedSecret(ssm_parameter(settings, settings.inspector_token_parameter), settings.secret_cache_seconds,
                            what=f"SSM parameter {settings.inspector_token_parameter}", clock=clock)
    if settings.inspector_token_secret:
        return CachedSecret(secrets_manager_secret(settings, settings.inspector_token_secret),
                            settings.secret_cache_seconds, what=f"secret {settings.inspector_token_secret}",
                            clock=clock)
    return None
