"""/openapi.json is a valid OpenAPI 3.1 document, so client generators can read it: in every app the tests build
(each registry they serve, the examples' included), every `$ref` resolves, operation ids are unique and no
`prefixItems` is empty; openapi-spec-validator accepts it; deployed, it is the dev one without the dev-only route.
The examples' pattern modules are validated and built deployed in tier 2 only (`_tier`)."""

from __future__ import annotations

import importlib
from collections import Counter
from typing import Any

import pytest
from openapi_spec_validator import validate

from dormant.actor import Registry
from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples.catalog import PATTERNS
from tests.api.apps import registry

_DOCUMENTS: dict[tuple[int, bool], dict[str, Any]] = {}


def _document(app_registry: Any, *, dev: bool = True) -> dict[str, Any]:
    """The app's document, built once per registry and mode in a test run (the tests only read it)."""
    key = (id(app_registry), dev)
    if key not in _DOCUMENTS:
        app = create_app(app_registry, Settings(dev=dev), service=TestEnv(app_registry).service)
        _DOCUMENTS[key] = app.openapi()
    return _DOCUMENTS[key]


def _walk(value: Any) -> list[dict[str, Any]]:
    found = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def test_an_action_without_arguments_takes_an_empty_array() -> None:
    schema = _document(registry)["paths"]["/actors/account/{key}/actions/explode"]["post"]["requestBody"][
        "content"]["application/json"]["schema"]
    assert schema == {"type": "array", "minItems": 0, "maxItems": 0}


def test_sends_document_conflicts_and_retryable_outages() -> None:
    send = _document(registry)["paths"]["/actors/account/{key}/queues/deposit"]["post"]["responses"]
    assert {"202", "200", "400", "409", "413", "422", "503", "default"} <= set(send)
    assert "Retry-After" in send["503"]["headers"]


# Every registry a test serves an app for (create_app in tests/): `dev` only adds a route (fire-timer), the
# callback and operator routes are in every one.
APP_REGISTRIES = ("tests.api.apps:registry", "tests.api.apps:desk_registry", "tests.api.vault_app:registry",
                  "tests.api.test_callbacks_api:registry", "tests.limits_app:registry",
                  "tests.limits_app:fixed_registry", "tests.large_app:registry", "tests.e2e.apps:registry",
                  "tests.e2e.map_app:registry", "tests.e2e.hostile_app:registry", "examples.app:registry",
                  "examples.versioned_evolution:registry_v1",
                  *sorted({f"examples.{module}:registry" for module in PATTERNS.values()}))


def _app_registry(spec: str) -> Registry:
    module, _, name = spec.partition(":")
    found = getattr(importlib.import_module(module), name)
    return found if isinstance(found, Registry) else found()


def unresolved_refs(document: dict[str, Any]) -> list[str]:
    """The `$ref`s of the document that do not name a part of it (local JSON pointers, RFC 6901)."""
    missing = []
    for node in _walk(document):
        ref = node.get("$ref")
        if not isinstance(ref, str):
            continue
        target: Any = document
        if not ref.startswith("#/"):
            missing.append(ref)  # the document refers to nothing outside itself
            continue
        for token in ref[2:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and token in target:
                target = target[token]
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                missing.append(ref)
                break
    return missing


def test_a_dangling_ref_is_found() -> None:
    document = {"components": {"schemas": {"A": {"type": "object"}, "a/b": {}}},
                "paths": {"/x": {"get": {"schema": {"$ref": "#/$defs/A"}}},
                          "/y": {"get": {"schema": {"anyOf": [{"$ref": "#/components/schemas/A"},
                                                              {"$ref": "#/components/schemas/a~1b"},
                                                              {"$ref": "#/components/schemas/B"}]}}}}}
    assert sorted(unresolved_refs(document)) == ["#/$defs/A", "#/components/schemas/B"]


def _tier(spec: str, *, pattern_tier: int) -> Any:
    """`spec` as a parameter; one of the examples' pattern modules in `pattern_tier`. Their documents are made by the
    same code from the same kinds of actors as the tests' apps, which tier 1 checks whole (the openapi-spec-validator
    takes about a second a document, and the examples' 28 were half of this module's minute)."""
    module = spec.partition(":")[0]
    is_pattern = module.startswith("examples.") and module not in ("examples.app", "examples.versioned_evolution")
    return pytest.param(spec, marks=pytest.mark.tier2) if is_pattern and pattern_tier == 2 else spec


@pytest.mark.parametrize("spec", [_tier(spec, pattern_tier=1) for spec in APP_REGISTRIES])
def test_every_ref_resolves_and_operations_are_unique(spec: str) -> None:
    """In every app's dev document (the examples' included, in tier 1): each `$ref` names a part of it, each
    operation id is unique, no `prefixItems` is empty (client generators choke on it)."""
    document = _document(_app_registry(spec))
    refs = [node["$ref"] for node in _walk(document) if isinstance(node.get("$ref"), str)]
    assert refs  # (the models are shared components: a document without refs would check nothing)
    assert unresolved_refs(document) == []
    ids = Counter(op["operationId"] for path in document["paths"].values() for op in path.values())
    assert [op for op, count in ids.items() if count > 1] == []
    assert [node for node in _walk(document) if node.get("prefixItems") == []] == []


@pytest.mark.parametrize("spec", [_tier(spec, pattern_tier=2) for spec in APP_REGISTRIES])
def test_the_document_validates(spec: str) -> None:
    """openapi-spec-validator accepts the dev document (OpenAPI 3.1; it raises e.g. DuplicateOperationIDError)."""
    validate(_document(_app_registry(spec)))


@pytest.mark.parametrize("spec", [_tier(spec, pattern_tier=2) for spec in APP_REGISTRIES])
def test_the_deployed_document_is_the_dev_one_without_fire_timer(spec: str) -> None:
    """Deployed, the document is the dev one without the dev-only route (fire-timer): the same components and the same
    operations, so the dev one's validation covers it."""
    app_registry = _app_registry(spec)
    document, development = _document(app_registry, dev=False), _document(app_registry, dev=True)
    assert unresolved_refs(document) == []
    assert {key: value for key, value in document.items() if key != "paths"} == {
        key: value for key, value in development.items() if key != "paths"}
    assert [path for path, item in document["paths"].items() if development["paths"].get(path) != item] == []
    assert set(development["paths"]) - set(document["paths"]) == {"/actors/{actor}/{key}/fire-timer"}


def test_the_callback_route_refers_to_its_request_and_error_models() -> None:
    post = _document(registry)["paths"]["/callbacks/{token}"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/CallbackRequest"}
    schemas = _document(registry)["components"]["schemas"]
    error = schemas["CallbackRequest"]["properties"]["error"]
    assert {"$ref": "#/components/schemas/CallbackErrorBody"} in error["anyOf"]
    assert schemas["CallbackErrorBody"]["required"] == ["type"]
