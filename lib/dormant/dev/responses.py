"""Plain JSON for moto's DynamoDB item responses, and the action table of moto's handlers computed once.

moto renders every response through a generic serializer that walks the operation's output shape member by
member (with key-name transforms per member): about a third of the embedded server's CPU under load went to
rendering Query and GetItem results. Their results are already in DynamoDB's wire form (`{"S": ...}` maps),
so for the item operations below their top-level members of the output shape are written with `json.dumps`
(binary values base64-encoded, as the serializer does); anything else, or a result JSON cannot take, goes
through moto's serializer (tests/integration/test_moto_gate.py compares both, value type by value type).
"""

from __future__ import annotations

import base64
import json
from typing import Any

FAST_OPERATIONS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "PutItem", "DeleteItem", "UpdateItem",
                             "BatchWriteItem"})
HEADERS = {"Content-Type": "application/x-amz-json-1.0"}


def _binary(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    raise TypeError(type(value).__name__)


def install() -> None:
    """Patch moto's DynamoResult and its handlers' method lookup (idempotent)."""
    import functools

    from moto.core import responses as core_responses
    from moto.dynamodb.responses import DynamoResult

    if getattr(DynamoResult, "_dormant_plain_json", False):
        return
    # moto lists a handler class's methods (inspect.getmembers) on every request to find the action: a class's
    # methods do not change, so once per class is enough (an eighth of the server's CPU).
    listing = getattr(core_responses, "method_names_from_class")  # noqa: B009 - not in moto's exported names
    setattr(core_responses, "method_names_from_class", functools.lru_cache(maxsize=None)(listing))  # noqa: B010
    original = DynamoResult.execute_result

    def execute_result(self: Any, context: Any) -> Any:
        shape = context.operation_model.output_shape
        if context.operation_model.name in FAST_OPERATIONS and isinstance(self.result, dict) and shape is not None:
            members = shape.members  # the serializer renders only what the output shape declares
            try:
                return 200, dict(HEADERS), json.dumps({k: v for k, v in self.result.items() if k in members},
                                                      default=_binary)
            except (TypeError, ValueError):
                pass
        return original(self, context)

    DynamoResult.execute_result = execute_result  # type: ignore[method-assign]
    DynamoResult._dormant_plain_json = True  # type: ignore[attr-defined]
