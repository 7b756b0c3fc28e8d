"""The DynamoDB store's Table (dormant.dynamodb.requests: errors classified by code in one place, batches retried) and
its keys (dormant.dynamodb.keys: the one module that spells a prefix; the deletion mark never taken for a search
item). No server: a fake client answers."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError  # type: ignore[import-untyped]

from dormant.dynamodb import keys
from dormant.dynamodb.callbacks import write_condition
from dormant.dynamodb.requests import Table
from dormant.errors import StorageError, StorageRefusedError

DYNAMODB = Path(keys.__file__).parent


def failure(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"the server says {code}"}}, "PutItem")


class FakeClient:
    """Answers each call with the next of `answers` (an exception is raised); records every call."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, method: str) -> Any:
        async def call(**kwargs: Any) -> Any:
            self.calls.append((method, kwargs))
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return call


async def test_a_failed_condition_is_false_and_nothing_else_is() -> None:
    client = FakeClient(failure("ConditionalCheckFailedException"), {}, failure("ConditionalCheckFailedException"))
    table = Table(client, "t")
    assert not await table.put({"pk": {"S": "a"}}, "attribute_not_exists(pk)")
    assert await table.put({"pk": {"S": "a"}}, "attribute_not_exists(pk)")
    assert not await table.delete({"pk": {"S": "a"}}, "h = :h", {":h": {"S": "x"}})
    assert client.calls[0] == ("put_item", {"Item": {"pk": {"S": "a"}}, "TableName": "t",
                                            "ConditionExpression": "attribute_not_exists(pk)"})


@pytest.mark.parametrize(("error", "raised"), [
    (failure("ValidationException"), StorageRefusedError),
    (failure("ProvisionedThroughputExceededException"), StorageError),
    (failure("InternalServerError"), StorageError),
    (EndpointConnectionError(endpoint_url="http://nowhere"), StorageError),
])
async def test_errors_are_classified_by_their_code(error: Exception, raised: type[Exception]) -> None:
    with pytest.raises(raised) as caught:
        await Table(FakeClient(error), "t").get({"pk": {"S": "a"}})
    assert type(caught.value) is raised and "GetItem on t" in str(caught.value)


async def test_a_batch_writes_what_the_server_left_unprocessed_again() -> None:
    items = [{"pk": {"S": str(n)}} for n in range(30)]
    left = [{"PutRequest": {"Item": items[3]}}]
    client = FakeClient({"UnprocessedItems": {"t": left}}, {}, {})
    await Table(client, "t").put_all(items)
    assert [len(kwargs["RequestItems"]["t"]) for _, kwargs in client.calls] == [25, 1, 5]
    assert client.calls[1][1]["RequestItems"]["t"] == left


async def test_a_batch_the_server_keeps_throttling_is_an_error_or_given_up() -> None:
    keys_wanted = [{"pk": {"S": "a"}, "sk": {"S": "i#1"}}]
    throttled = {"Responses": {"t": []}, "UnprocessedKeys": {"t": {"Keys": keys_wanted}}}
    with pytest.raises(StorageError):
        await Table(FakeClient(*[throttled] * 6), "t").get_all(keys_wanted, "sk")
    found = {"Responses": {"t": [{"sk": {"S": "i#2"}}]}, "UnprocessedKeys": {"t": {"Keys": keys_wanted}}}
    assert await Table(FakeClient(found, *[throttled] * 5), "t").get_all(keys_wanted, "sk", give_up=True) == [
        {"sk": {"S": "i#2"}}]


def test_the_deletion_mark_is_never_a_search_item() -> None:
    assert keys.DELETION_MARK == "x#" and keys.is_deletion_mark("x#")
    assert not keys.is_search_key(keys.DELETION_MARK)
    assert keys.is_search_key(keys.search_key("amount")) and keys.attribute_of(keys.search_key("amount")) == "amount"
    assert not keys.is_deletion_mark(keys.search_key("a"))
    with pytest.raises(ValueError):
        keys.search_key("")  # would be the mark


def test_callback_items_are_written_by_the_shared_rule() -> None:
    assert write_condition("open") == ("attribute_not_exists(pk)", {})
    assert write_condition("completed") == ("attribute_not_exists(pk) OR #st = :s0", {":s0": {"S": "open"}})


PREFIX = re.compile(r"^[a-z/]+#")  # what a key prefix looks like: "c#", "callback#", "limit#"...


def test_no_module_but_keys_spells_a_key_prefix() -> None:
    """Every partition and sort-key prefix is dormant.dynamodb.keys's (string constants that start like one)."""
    spelled = []
    for path in sorted(DYNAMODB.glob("*.py")):
        if path.name == "keys.py":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        spelled += [f"{path.name}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and PREFIX.match(node.value)]
    assert not spelled, "key prefixes spelled outside dormant.dynamodb.keys: " + "; ".join(spelled)
