"""Lean parsing of DynamoDB's item responses, plugged into botocore as its response parser factory.

botocore parses a JSON response by walking the operation's output shape: every attribute value of every item is a
structure of ten members, each looked up and dispatched, which made response parsing the largest single cost of a
wake-up's client time (docs/performance.md, "Through the AWS adapter"). DynamoDB's JSON is already the parsed form but
for its binary values (base64 on the wire, bytes once parsed), so the item operations' outputs are parsed here
with `json.loads` and a walk that touches only binary values and the containers holding them. Everything else
(errors, every other operation and service, including SQS's JSON protocol) is botocore's own parser.

The factory is registered on the sessions Dormant makes its clients from (dormant.core.clients); clients made from
another session are untouched.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from botocore.parsers import PROTOCOL_PARSERS, ResponseParserFactory  # type: ignore[import-untyped]

Item = dict[str, Any]


def _value(value: dict[str, Any]) -> dict[str, Any]:
    """One attribute value with its binary parts decoded (the only parts botocore's parse changes)."""
    if "S" in value or "N" in value:
        return value
    if "B" in value:
        return {"B": base64.b64decode(value["B"])}
    if "M" in value:
        return {"M": item(value["M"])}
    if "L" in value:
        return {"L": [_value(element) for element in value["L"]]}
    if "BS" in value:
        return {"BS": [base64.b64decode(element) for element in value["BS"]]}
    return value


def item(attributes: Item) -> Item:
    """An item (or key) as botocore parses it: its binary values decoded, in place."""
    for name, value in attributes.items():
        if "S" not in value and "N" not in value:
            attributes[name] = _value(value)
    return attributes


def _collection_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    key = metrics.get("ItemCollectionKey")
    if key is not None:
        item(key)
    return metrics


def _single(parsed: dict[str, Any]) -> dict[str, Any]:
    """GetItem, PutItem, UpdateItem, DeleteItem: `Item` or `Attributes`, ItemCollectionMetrics."""
    for name in ("Item", "Attributes"):
        if name in parsed:
            item(parsed[name])
    if "ItemCollectionMetrics" in parsed:
        _collection_metrics(parsed["ItemCollectionMetrics"])
    return parsed


def _query(parsed: dict[str, Any]) -> dict[str, Any]:
    """Query and Scan: `Items`, `LastEvaluatedKey`."""
    for found in parsed.get("Items", ()):
        item(found)
    if "LastEvaluatedKey" in parsed:
        item(parsed["LastEvaluatedKey"])
    return parsed


def _batch_get(parsed: dict[str, Any]) -> dict[str, Any]:
    for items in parsed.get("Responses", {}).values():
        for found in items:
            item(found)
    for wanted in parsed.get("UnprocessedKeys", {}).values():
        for key in wanted.get("Keys", ()):
            item(key)
    return parsed


def _batch_write(parsed: dict[str, Any]) -> dict[str, Any]:
    for requests in parsed.get("UnprocessedItems", {}).values():
        for request in requests:
            if "PutRequest" in request:
                item(request["PutRequest"]["Item"])
            if "DeleteRequest" in request:
                item(request["DeleteRequest"]["Key"])
    for metrics in parsed.get("ItemCollectionMetrics", {}).values():
        for entry in metrics:
            _collection_metrics(entry)
    return parsed


# DynamoDB's output shapes by name -> their lean parse (DynamoDB's: they have a ConsumedCapacity member)
LEAN: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "GetItemOutput": _single, "PutItemOutput": _single, "UpdateItemOutput": _single, "DeleteItemOutput": _single,
    "QueryOutput": _query, "ScanOutput": _query, "BatchGetItemOutput": _batch_get,
    "BatchWriteItemOutput": _batch_write}


def _lean(base: Any) -> type:
    """`base` (a JSON-protocol parser class) with DynamoDB's item outputs parsed lean."""
    botocores = base._handle_json_body

    def _handle_json_body(self: Any, raw_body: bytes, shape: Any) -> Any:
        lean = LEAN.get(shape.name) if shape is not None else None
        if lean is None or "ConsumedCapacity" not in shape.members:
            return botocores(self, raw_body, shape)
        parsed = self._parse_body_as_json(raw_body)
        return lean(parsed) if isinstance(parsed, dict) else botocores(self, raw_body, shape)

    return type(f"Lean{base.__name__}", (base,), {"_handle_json_body": _handle_json_body})


class LeanParserFactory(ResponseParserFactory):  # type: ignore[misc]
    """botocore's parser factory, with the lean JSON parser (`parsers`: the protocol's parser classes, botocore's or
    aiobotocore's)."""

    def __init__(self, parsers: dict[str, type] | None = None) -> None:
        super().__init__()
        self._parsers = dict(parsers if parsers is not None else PROTOCOL_PARSERS)
        self._parsers["json"] = _lean(self._parsers["json"])

    def create_parser(self, protocol_name: str) -> Any:
        return self._parsers[protocol_name](**self._defaults)


def lean_botocore(session: Any) -> Any:
    """Register the lean parser on a botocore session (before its clients are made); returns the session."""
    session.register_component("response_parser_factory", LeanParserFactory())
    return session


def lean_aiobotocore(session: Any) -> Any:
    """The same for an aiobotocore session (its parsers are coroutine-faced subclasses of botocore's)."""
    from aiobotocore.parsers import PROTOCOL_PARSERS as AIO_PARSERS  # type: ignore[import-untyped]

    session.register_component("response_parser_factory", LeanParserFactory(AIO_PARSERS))
    return session
