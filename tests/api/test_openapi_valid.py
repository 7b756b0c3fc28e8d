"""/openapi.json is a valid OpenAPI 3.1 document (openapi-spec-validator): unique operation ids and no empty
`prefixItems`, for the API tests' registry and for every example's, so client generators can read it."""

from __future__ import annotations

import importlib
from collections import Counter
from typing import Any

import pytest
from openapi_spec_validator import validate

from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples.catalog import PATTERNS
from tests.api.apps import registry


def _document(app_registry: Any) -> dict[str, Any]:
    app = create_app(app_registry, Settings(dev=True), service=TestEnv(app_registry).service)
    return app.openapi()


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


def _registries() -> list[tuple[str, Any]]:
    modules = sorted(set(PATTERNS.values()))
    return [("tests.api.apps", registry)] + [(m, importlib.import_module(f"examples.{m}").registry) for m in modules]


@pytest.mark.parametrize(("name", "app_registry"), _registries(), ids=[name for name, _ in _registries()])
def test_the_document_validates(name: str, app_registry: Any) -> None:
    document = _document(app_registry)
    validate(document)  # raises OpenAPIValidationError (e.g. DuplicateOperationIDError) if not valid
    ids = Counter(op["operationId"] for path in document["paths"].values() for op in path.values())
    assert [op for op, count in ids.items() if count > 1] == []
    assert [node for node in _walk(document) if node.get("prefixItems") == []] == []


def test_an_action_without_arguments_takes_an_empty_array() -> None:
    schema = _document(registry)["paths"]["/actors/account/{key}/actions/explode"]["post"]["requestBody"][
        "content"]["application/json"]["schema"]
    assert schema == {"type": "array", "minItems": 0, "maxItems": 0}


def test_sends_document_conflicts_and_retryable_outages() -> None:
    send = _document(registry)["paths"]["/actors/account/{key}/queues/deposit"]["post"]["responses"]
    assert {"202", "200", "400", "409", "413", "422", "503", "default"} <= set(send)
    assert "Retry-After" in send["503"]["headers"]
