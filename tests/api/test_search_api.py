"""Search over HTTP: `GET /actors/{actor}?where=...` and `/counts?where=...` on the real FastAPI app, in memory and on
the AWS stack (DynamoDB Local + moto's SQS); the HTTP client gives what the in-process client gives; hostile `where`
and cursors get a 400 that names the condition by position and never echoes it, and change nothing stored."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from dormant.errors import InvalidCursorError, InvalidSearchConditionError
from dormant.http.app import create_app
from dormant.http.client import HttpClient
from dormant.memory.store import MemoryEventStore
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples.order_search import registry
from tests.api.support import TOKEN, dump_store, serve
from tests.aws_env import AwsTestEnv

SECRET = "4111-1111-1111-1111"
SETTINGS = dict(auth_mode="none", inspector_token=TOKEN)


@pytest.fixture(params=["memory", "aws"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if request.param == "memory":
        async with TestEnv(registry) as found:
            yield found
        return
    settings = Settings(**request.getfixturevalue("aws_endpoints"), **SETTINGS)  # type: ignore[arg-type]
    async with AwsTestEnv(registry, settings=settings) as found:
        yield found


@asynccontextmanager
async def api(env: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(registry, Settings(**SETTINGS), service=env.service)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api",
                                 headers={"X-Dormant-Operator-Token": TOKEN}) as http:
        yield http


async def place(env: Any, orders: dict[str, tuple[str, int]]) -> None:
    for key, (customer, amount) in orders.items():
        await env.client.get_or_create("shop-order", key.split(",")).send("place", {"customer": customer,
                                                                                     "amount": amount})
    await env.run_until_idle()


async def test_where_lists_and_counts_the_matches_with_their_attributes(env: Any) -> None:
    await place(env, {"o-1": ("42", 12_500), "o-2": ("42", 4_000), "o-3": ("7", 30_000), "tenant,9": ("42", 20_000)})
    async with api(env) as http:
        types = (await http.get("/actors")).json()
        assert types[0]["search"] == {"amount": "int", "customer": "str", "express": "bool", "placed_at": "datetime",
                                      "stage": "str"}
        found = await http.get("/actors/shop-order", params={"where": ["customer=42", "amount>10000"]})
        assert found.status_code == 200, found.text
        body = found.json()
        assert [(a["key"], a["segment"], a["attributes"]["amount"]) for a in body["actors"]] == [
            (["o-1"], "o-1", 12_500), (["tenant", "9"], "tenant,9", 20_000)]
        assert body["cursor"] is None and body["actors"][0]["status"] == "sleeping"
        first = (await http.get("/actors/shop-order", params={"where": "amount>=0", "limit": 3})).json()
        assert [a["key"][0] for a in first["actors"]] == ["o-2", "o-1", "tenant"] and first["cursor"]
        rest = (await http.get("/actors/shop-order", params={"where": "amount>=0", "cursor": first["cursor"]})).json()
        assert [a["key"][0] for a in rest["actors"]] == ["o-3"] and rest["cursor"] is None
        assert (await http.get("/actors/shop-order", params={"where": "amount>=0", "status": "failed"})
                ).json()["actors"] == []
        counts = (await http.get("/actors/shop-order/counts", params={"where": ["customer=42"], "limit": 2})).json()
        assert counts["counts"]["sleeping"] == {"count": 2, "exact": False}
        plain = (await http.get("/actors/shop-order")).json()  # no where: the listing, without attributes
        assert len(plain["actors"]) == 4 and all(a["attributes"] is None for a in plain["actors"])
        status = (await http.get("/actors/shop-order/o-3/status")).json()
        assert status["search"]["customer"] == "7" and status["search"]["express"] is True


async def test_the_http_client_finds_what_the_in_process_client_finds(env: Any) -> None:
    await place(env, {f"o-{n}": (str(n % 3), n * 1000) for n in range(7)})
    app = create_app(registry, Settings(**SETTINGS), service=env.service)  # type: ignore[arg-type]
    async with serve(app) as url, HttpClient(url, token=TOKEN) as http:
        for where in (["customer=1"], ["amount>1500", "amount<=5000"], ["customer^=", "express=false"]):
            local = [(s.key, s.attributes) async for s in env.client.actors("shop-order", where=where)]
            remote = [(s.key, s.attributes) async for s in http.actors("shop-order", where=where, page_size=2)]
            assert remote == local and local
            assert await http.counts("shop-order", where=where) == await env.client.counts("shop-order", where=where)
        with pytest.raises(InvalidSearchConditionError, match="condition 2"):
            await http.list_actors("shop-order", where=["customer=1", f"amount>{SECRET}"])
        with pytest.raises(InvalidCursorError):
            await http.list_actors("shop-order", where=["customer=1"], cursor="bm90IGEgY3Vyc29y")
        with pytest.raises(TypeError):
            await http.list_actors("shop-order", where="customer=1")  # type: ignore[arg-type]


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


HOSTILE: list[tuple[dict[str, Any], int, str, str]] = [
    ({"where": SECRET}, 400, "invalid_where", "condition 1 is not"),
    ({"where": ""}, 400, "invalid_where", "condition 1 is not"),
    ({"where": f"card={SECRET}"}, 400, "invalid_where", "names no search attribute"),
    ({"where": ["customer=1", f"amount={SECRET}"]}, 400, "invalid_where", "condition 2"),
    ({"where": [f"amount={n}" for n in range(11)]}, 400, "invalid_where", "1 to 10"),
    ({"where": f"customer={SECRET}" + "x" * 600}, 400, "invalid_where", "600"),
    ({"where": f"customer={SECRET}\x1b]0;pwned\x07"}, 400, "invalid_where", "control"),
    ({"where": f"express>{SECRET}"}, 400, "invalid_where", "operators ="),
    ({"where": f"placed_at<{SECRET}"}, 400, "invalid_where", "ISO 8601"),
    ({"where": "amount>0", "cursor": b64(SECRET)}, 400, "invalid_cursor", "not handed out"),
    ({"where": "amount>0", "cursor": b64(f'["amount","{SECRET}","shop-order/x"]')}, 400, "invalid_cursor", ""),
    ({"where": "amount>0", "cursor": b64('["amount","0!0000000000000000","other/x"]')}, 400, "invalid_cursor", ""),
    ({"where": "customer=1", "cursor": b64('["amount","0!0000000000000000","shop-order/x"]')}, 400,
     "invalid_cursor", ""),
    ({"where": "amount>0", "cursor": "A" * 5000}, 400, "invalid_cursor", ""),
    ({"cursor": b64('["amount","0!0000000000000000","shop-order/x"]')}, 400, "invalid_cursor", ""),  # not a listing's
]


@pytest.mark.parametrize("params, status, code, rule", HOSTILE)
async def test_hostile_where_and_cursors_are_refused_without_echo(params: dict[str, Any], status: int, code: str,
                                                                  rule: str) -> None:
    async with TestEnv(registry) as env:
        await place(env, {"o-1": ("1", 100)})
        assert isinstance(env.store, MemoryEventStore)
        before = dump_store(env.store)
        async with api(env) as http:
            for path in ("/actors/shop-order", "/actors/shop-order/counts"):
                if "cursor" in params and path.endswith("counts"):
                    continue
                answer = await http.get(path, params=params)
                assert answer.status_code == status, answer.text
                error = answer.json()["error"]
                assert error["code"] == code and rule in error["message"]
                assert SECRET not in answer.text and "card" not in answer.text and "pwned" not in answer.text
            stranger = await http.get("/actors/shop-order", params=params, headers={"X-Dormant-Operator-Token": "x"})
            assert stranger.status_code == 401  # the token is checked before the conditions are read
            unknown = await http.get("/actors/nobody", params={"where": f"a={SECRET}"})
            assert unknown.status_code == 404 and SECRET not in unknown.text
        assert dump_store(env.store) == before
