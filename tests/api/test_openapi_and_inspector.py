"""/openapi.json carries the actors' own models; the inspector's workflow-history document."""

from __future__ import annotations

from typing import Any

import httpx

from dormant.settings import Settings
from examples.join_dashboard import registry as dashboard_registry
from tests.api.apps import registry
from tests.api.support import TOKEN, served_env


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


async def test_openapi_shows_queue_bodies_responses_state_and_actions() -> None:
    async with served_env(registry) as (_, url), httpx.AsyncClient(base_url=url) as http:
        document = (await http.get("/openapi.json")).json()
        docs = await http.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    paths = document["paths"]
    send = paths["/actors/account/{key}/queues/deposit"]["post"]
    body = resolve(document, send["requestBody"]["content"]["application/json"]["schema"])
    assert body["required"] == ["amount"]
    assert body["properties"]["amount"] == {"exclusiveMinimum": 0, "title": "Amount", "type": "integer"}
    assert {p["name"] for p in send["parameters"]} == {"key", "wait", "timeout", "Idempotency-Key", "create"}
    answered = paths["/actors/account/{key}/queues/withdraw"]["post"]["responses"]["200"]
    receipt = resolve(document, answered["content"]["application/json"]["schema"]["properties"]["response"])
    assert set(receipt["properties"]) == {"ok", "balance"}
    go = paths["/actors/sleeper/{key}/queues/go"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert go == {"type": "integer"}
    state = resolve(document, paths["/actors/account/{key}/state"]["get"]["responses"]["200"]["content"][
        "application/json"]["schema"])
    assert set(state["properties"]) == {"owner", "balance", "entries"}
    add = paths["/actors/account/{key}/actions/add"]["post"]
    args = add["requestBody"]["content"]["application/json"]["schema"]
    assert args["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert (args["minItems"], args["maxItems"]) == (1, 2)
    assert add["description"].startswith("Add to the balance")
    result = add["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["result"]
    assert result == {"type": "integer"}
    events = paths["/actors/account/{key}/events"]["get"]["responses"]["200"]["content"]["application/json"]
    changed = events["schema"]["properties"]["events"]["items"]["oneOf"][0]
    assert changed["properties"]["name"] == {"const": "changed"}
    assert set(resolve(document, changed["properties"]["payload"])["properties"]) == {"balance", "kind"}
    assert paths["/actors/account/{key}/inspector/workflow-history"]["get"]["security"] == [{"bearer": []}]
    assert "/actors/plain/{key}/queues/deposit" not in paths
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


async def test_inspector_lists_entries_in_order_with_locations_and_metadata() -> None:
    settings = Settings(inspector_token=TOKEN, auth_mode="none")  # type: ignore[arg-type]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with served_env(registry, settings) as (env, url), httpx.AsyncClient(base_url=url) as http:
        for amount in (3, 4):
            await http.post("/actors/account/alice/queues/deposit", json={"amount": amount})
        await env.run_until_idle()
        document = (await http.get("/actors/account/alice/inspector/workflow-history", headers=auth)).json()
        await http.put("/actors/plain/p")
        plain = (await http.get("/actors/plain/p/inspector/workflow-history", headers=auth)).json()
    assert (document["isWorkflowEnabled"], document["workflowState"]) == (True, "sleeping")
    entries = document["history"]["entries"]
    ids = [e["id"] for e in entries]
    assert ids[0] == "account-loop" and "account-loop/~1/apply" in ids
    apply = next(e for e in entries if e["id"] == "account-loop/~1/apply")
    assert apply["location"] == ["account-loop", {"loop": "account-loop", "iteration": 1}, "apply"]
    assert apply["kind"] == {"tag": "step", "val": {"name": "apply", "output": {"ok": True, "balance": 7},
                                                    "error": None}}
    waited = next(e for e in entries if e["id"] == "account-loop/~1/wait-command")
    assert waited["kind"]["tag"] == "message"
    assert waited["kind"]["val"]["messages"][0]["body"] == {"amount": 4, "note": None}
    metadata = document["history"]["entryMetadata"]["account-loop/~1/apply"]
    assert metadata["status"] == "completed" and metadata["attempts"] >= 1
    assert metadata["createdAt"] == env.now()
    assert set(document["history"]["entryMetadata"]) == set(ids)
    assert plain == {"isWorkflowEnabled": False, "workflowState": None, "history": None}


async def test_inspector_shows_join_branches() -> None:
    async with served_env(dashboard_registry) as (env, url), httpx.AsyncClient(base_url=url) as http:
        await http.post("/actors/dashboard/main/queues/refresh", json={})
        await env.run_until_idle()
        document = (await http.get("/actors/dashboard/main/inspector/workflow-history")).json()
    joins = [e for e in document["history"]["entries"] if e["kind"]["tag"] == "join"]
    assert joins, document
    branches = joins[0]["kind"]["val"]["branches"]
    assert set(branches) == {"users", "orders", "revenue"}
    assert {name: (b["status"], b["output"]) for name, b in branches.items()} == {
        "users": ("completed", 120), "orders": ("completed", 45), "revenue": ("completed", 9800)}
    users_step = next(e for e in document["history"]["entries"] if e["id"].endswith("fetch-summary/users/fetch-users"))
    assert users_step["location"][-3:] == ["fetch-summary", "users", "fetch-users"]


async def test_protected_routes_are_closed_without_a_configured_token_and_open_in_dev_mode() -> None:
    route = "/actors/plain/p/inspector/workflow-history"
    async with served_env(registry, Settings(auth_mode="none")) as (_, url), httpx.AsyncClient(base_url=url) as http:
        await http.put("/actors/plain/p")
        closed = await http.get(route, headers={"Authorization": "Bearer anything"})
    assert closed.status_code == 401 and "DORMANT_INSPECTOR_TOKEN" in closed.json()["error"]["message"]
    async with served_env(registry, Settings(dev=True)) as (_, url), httpx.AsyncClient(base_url=url) as http:
        await http.put("/actors/plain/p")
        assert (await http.get(route)).status_code == 200


async def test_export_route_gives_a_replayable_history_behind_the_token() -> None:
    from dormant.runtime.offline import parse_export, replay_snapshot

    settings = Settings(inspector_token=TOKEN, auth_mode="none")  # type: ignore[arg-type]
    route = "/actors/account/alice/inspector/export"
    async with served_env(registry, settings) as (env, url), httpx.AsyncClient(base_url=url) as http:
        for amount in (3, 4):
            await http.post("/actors/account/alice/queues/deposit", json={"amount": amount})
        await env.run_until_idle()
        assert (await http.get(route)).status_code == 401
        assert (await http.get(route, headers={"Authorization": "Bearer wrong"})).status_code == 401
        assert (await http.get("/actors/account/nobody/inspector/export",
                               headers={"Authorization": f"Bearer {TOKEN}"})).status_code == 404
        response = await http.get(route, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson")
    snapshot = parse_export(response.text.splitlines())
    assert snapshot.ref.key == ("alice",) and any(e.location == "account-loop/~1/apply" for e in snapshot.history)
    report = await replay_snapshot(registry, snapshot)
    assert report.outcome == "ok", report.detail


async def test_inspector_history_and_export_show_a_map_and_its_items() -> None:
    from dormant.runtime.offline import parse_export, replay_snapshot
    from examples.bounded_map import REPLICAS
    from examples.bounded_map import registry as quorum_registry

    auth = {"Authorization": f"Bearer {TOKEN}"}
    settings = Settings(inspector_token=TOKEN, auth_mode="none")  # type: ignore[arg-type]
    async with served_env(quorum_registry, settings) as (env, url), httpx.AsyncClient(base_url=url) as http:
        await http.post("/actors/quorum-write/main/queues/writes", json={"key": "doc", "value": "v"})
        await env.run_until_idle()
        document = (await http.get("/actors/quorum-write/main/inspector/workflow-history", headers=auth)).json()
        history = (await http.get("/actors/quorum-write/main/history", headers=auth)).json()
        export = await http.get("/actors/quorum-write/main/inspector/export", headers=auth)
    entries = {e["id"]: e for e in document["history"]["entries"]}
    mapped = entries["write-loop/~0/replicate"]
    assert mapped["kind"] == {"tag": "map", "val": {"name": "replicate", "items": REPLICAS}}
    assert document["history"]["entryMetadata"]["write-loop/~0/replicate"]["status"] == "completed"
    first = entries["write-loop/~0/replicate/0"]
    assert first["kind"] == {"tag": "map_item", "val": {"name": "0", "index": 0, "output": "replica-1:doc"}}
    assert first["location"][-2:] == ["replicate", "0"]
    assert "write-loop/~0/replicate/0/write" in entries
    rows = {e["location"]: e for e in history}
    assert rows["write-loop/~0/replicate"]["kind"] == "map" and rows["write-loop/~0/replicate"]["items"] == REPLICAS
    assert rows["write-loop/~0/replicate/2"]["kind"] == "map_item"
    report = await replay_snapshot(quorum_registry, parse_export(export.text.splitlines()))
    assert report.outcome == "ok", report.detail
