"""The HTTP client's TLS settings are made once per process and shared by every client (loading the CA bundle costs
about 50 ms of CPU; each CLI command and each client a test made paid it, even for an http:// API)."""

from __future__ import annotations

import ssl
from typing import Any

import httpx
import pytest

from dormant.http import client as http_client
from dormant.http.client import HttpClient
from tests.api.apps import account, registry
from tests.api.support import served_env


async def test_every_client_uses_one_tls_context_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[ssl.SSLContext] = []
    given: list[Any] = []
    create = httpx.create_ssl_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(create(*args, **kwargs))
        return made[-1]

    class Recorded(httpx.AsyncClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            given.append(kwargs.get("verify", True))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(httpx, "create_ssl_context", counted)
    monkeypatch.setattr(http_client.httpx, "AsyncClient", Recorded)
    http_client._tls_context.cache_clear()  # (the process may have made it already)
    try:
        async with served_env(registry) as (_env, url):
            for n in range(3):
                async with HttpClient(url) as client:  # a client per command, as the CLI makes them
                    handle = await client.create(account.name, f"tls-{n}")
                    assert await handle.state() is not None
    finally:
        http_client._tls_context.cache_clear()
    assert len(made) == 1
    assert len(given) == 3 and all(verify is made[0] for verify in given)
    assert made[0].verify_mode == ssl.CERT_REQUIRED and made[0].check_hostname  # verification is still on
