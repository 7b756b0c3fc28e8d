"""dormant.core.responses: DynamoDB's item responses parsed lean give exactly what botocore's parser gives."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from botocore.parsers import PROTOCOL_PARSERS
from botocore.session import get_session

from dormant.core.responses import LeanParserFactory

SERVICE = get_session().get_service_model("dynamodb")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


ITEM = {"pk": {"S": "counter/é"}, "v": {"N": "12"}, "z": {"B": b64(b"\x00compressed\xff")},
        "snap": {"BOOL": True}, "none": {"NULL": True}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2.5"]},
        "bs": {"BS": [b64(b"x"), b64(b"y\x01")]},
        "m": {"M": {"inner": {"B": b64(b"deep")}, "s": {"S": "t"},
                    "l": {"L": [{"B": b64(b"in a list")}, {"N": "3"}, {"M": {"b": {"B": b64(b"z")}}}]}}}}
CAPACITY = {"TableName": "t", "CapacityUnits": 1.5, "Table": {"CapacityUnits": 1},
            "LocalSecondaryIndexes": {"pending": {"CapacityUnits": 0.5}}}
METRICS = {"ItemCollectionKey": {"pk": {"B": b64(b"key")}}, "SizeEstimateRangeGB": [0, 1.5]}

RESPONSES: list[tuple[str, dict[str, Any]]] = [
    ("Query", {"Items": [ITEM, {"pk": {"S": "x"}}], "Count": 2, "ScannedCount": 2,
               "LastEvaluatedKey": {"pk": {"S": "x"}, "sk": {"B": b64(b"k")}}, "ConsumedCapacity": CAPACITY}),
    ("Query", {"Items": [], "Count": 0, "ScannedCount": 0}),
    ("Scan", {"Items": [ITEM], "Count": 1, "ScannedCount": 1}),
    ("GetItem", {"Item": ITEM, "ConsumedCapacity": CAPACITY}),
    ("GetItem", {}),
    ("PutItem", {}),
    ("PutItem", {"Attributes": ITEM, "ConsumedCapacity": CAPACITY, "ItemCollectionMetrics": METRICS}),
    ("UpdateItem", {"Attributes": {"n": {"N": "1"}}}),
    ("DeleteItem", {"Attributes": ITEM}),
    ("BatchGetItem", {"Responses": {"t": [ITEM]}, "UnprocessedKeys": {"t": {
        "Keys": [{"pk": {"S": "a"}, "sk": {"B": b64(b"b")}}], "ConsistentRead": True,
        "ProjectionExpression": "pk"}}, "ConsumedCapacity": [CAPACITY]}),
    ("BatchWriteItem", {"UnprocessedItems": {"t": [{"PutRequest": {"Item": ITEM}},
                                                   {"DeleteRequest": {"Key": {"pk": {"B": b64(b"gone")}}}}]},
                        "ItemCollectionMetrics": {"t": [METRICS]}, "ConsumedCapacity": [CAPACITY]}),
]


def parse(parser: Any, operation: str, body: bytes, status: int = 200) -> Any:
    response = {"status_code": status, "headers": {"x-amzn-requestid": "r-1"}, "body": body}
    return parser.parse(response, SERVICE.operation_model(operation).output_shape)


@pytest.mark.parametrize(("operation", "payload"), RESPONSES, ids=[op for op, _ in RESPONSES])
def test_same_as_botocore(operation: str, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    lean = LeanParserFactory().create_parser("json")
    assert type(lean) is not PROTOCOL_PARSERS["json"]  # the lean parser is the one made
    assert parse(lean, operation, body) == parse(PROTOCOL_PARSERS["json"](), operation, body)


def test_binary_values_are_bytes() -> None:
    parsed = parse(LeanParserFactory().create_parser("json"), "GetItem", json.dumps({"Item": ITEM}).encode())
    assert parsed["Item"]["z"]["B"] == b"\x00compressed\xff"
    assert parsed["Item"]["m"]["M"]["l"]["L"][2]["M"]["b"]["B"] == b"z"


def test_errors_and_other_operations_are_botocores() -> None:
    lean = LeanParserFactory().create_parser("json")
    error = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
                        "message": "The conditional request failed"}).encode()
    assert (parse(lean, "PutItem", error, 400)["Error"]
            == parse(PROTOCOL_PARSERS["json"](), "PutItem", error, 400)["Error"])
    table = json.dumps({"Table": {"TableName": "t", "CreationDateTime": 1700000000.5}}).encode()
    described = parse(lean, "DescribeTable", table)
    assert described == parse(PROTOCOL_PARSERS["json"](), "DescribeTable", table)
    assert described["Table"]["CreationDateTime"].year == 2023  # a timestamp, as botocore parses it
