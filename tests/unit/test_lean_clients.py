"""dormant.core.clients: the clients Dormant makes skip what need not be done per request (no request is made)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from dormant.core.clients import aiobotocore_session, botocore_session, open_client
from dormant.core.responses import LeanParserFactory
from dormant.settings import Settings

SETTINGS = Settings(endpoint_url="http://127.0.0.1:1",
                    region="us-east-1")


def test_the_sessions_parse_dynamodb_lean() -> None:
    assert isinstance(botocore_session().get_component("response_parser_factory"), LeanParserFactory)
    assert isinstance(aiobotocore_session().get_component("response_parser_factory"), LeanParserFactory)


@pytest.mark.parametrize("kind", ["threads", "aiobotocore"])
async def test_own_inputs_are_not_validated_again_and_the_user_agent_is_made_once(
        kind: str) -> None:
    from botocore.exceptions import EndpointConnectionError, ParamValidationError

    # a parameter of the wrong type: a client that validates refuses it before sending; Dormant's send it (to no
    # server here)
    calls = {"dynamodb": ("get_item", {"TableName": "t", "Key": {"pk": {"S": "x"}}, "ConsistentRead": "yes"}),
             "sqs": ("get_queue_url", {"QueueName": 7})}
    for service, (operation, params) in calls.items() if kind == "threads" else [("dynamodb", calls["dynamodb"])]:
        plain = botocore_session().create_client(service, region_name="us-east-1", endpoint_url="http://127.0.0.1:1")
        with pytest.raises(ParamValidationError):
            getattr(plain, operation)(**params)
        async with open_client(service, SETTINGS, kind=kind, attempts=1,  # type: ignore[arg-type]
                               connect_timeout=1) as client:
            assert client.meta.config.user_agent.count(" dormant") == 1
            with pytest.raises(EndpointConnectionError):
                await getattr(client, operation)(**params)


# -- the generic handlers taken off (trim_handlers): every request is still what botocore would send -----------------
class _Raw:
    """A response body both client kinds can read (botocore reads `stream()`, aiobotocore awaits `read()`)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body

    async def read(self) -> bytes:
        return self.body


def _answer(kind: str, status: int, body: dict[str, Any]) -> Any:
    from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]

    raw = json.dumps(body).encode()
    headers = {"content-type": "application/x-amz-json-1.0", "content-length": str(len(raw))}
    if kind == "aiobotocore":
        from aiobotocore.awsrequest import AioAWSResponse  # type: ignore[import-untyped]

        return AioAWSResponse("http://127.0.0.1:1/", status, headers, _Raw(raw))
    return AWSResponse("http://127.0.0.1:1/", status, headers, _Raw(raw))


@contextlib.asynccontextmanager
async def _answered(kind: str, service: str, answers: list[tuple[int, dict[str, Any]]], *, trimmed: bool = True,
                    attempts: int = 4) -> AsyncIterator[tuple[Any, list[Any]]]:
    """A client whose requests are answered from `answers` (the last one repeats) instead of a server; the requests
    it would have sent are collected (signed, after every handler ran)."""
    sent: list[Any] = []

    def answer(request: Any, **_: Any) -> Any:
        sent.append(request)
        return _answer(kind, *answers[min(len(sent), len(answers)) - 1])

    if trimmed:
        opened = open_client(service, SETTINGS, kind=kind, attempts=attempts)  # type: ignore[arg-type]
    else:
        opened = _untrimmed(kind, service, attempts)
    async with opened as client:
        client.meta.events.register("before-send", answer)
        yield client, sent


@contextlib.asynccontextmanager
async def _untrimmed(kind: str, service: str, attempts: int) -> AsyncIterator[Any]:
    """A client made as open_client makes it, without trim_handlers."""
    from dormant.core import clients

    def keep(client: Any) -> list[str]:
        return []

    original = clients.trim_handlers
    clients.trim_handlers = keep
    try:
        async with open_client(service, SETTINGS, kind=kind, attempts=attempts) as client:  # type: ignore[arg-type]
            yield client
    finally:
        clients.trim_handlers = original


def _request_facts(request: Any) -> tuple[bytes, dict[str, str]]:
    """What a request says, less what differs on every request (time, signature, invocation id)."""
    varying = {"x-amz-date", "authorization", "amz-sdk-invocation-id"}
    return request.body, {k.lower(): v for k, v in request.headers.items() if k.lower() not in varying}


@pytest.mark.parametrize("kind", ["threads", "aiobotocore"])
async def test_trimmed_clients_send_what_botocore_sends(kind: str) -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("dynamodb", "query", {"TableName": "t", "KeyConditionExpression": "pk = :pk",
                               "ExpressionAttributeValues": {":pk": {"S": "a"}}}),
        ("dynamodb", "put_item", {"TableName": "t", "Item": {"pk": {"S": "a"}, "z": {"B": b"\x00\x01"}}}),
        ("sqs", "send_message", {"QueueUrl": "http://127.0.0.1:1/q", "MessageBody": "{}"})]
    for service, operation, params in calls:
        facts = []
        for trimmed in (True, False):
            async with _answered(kind, service, [(200, {})], trimmed=trimmed) as (client, sent):
                await getattr(client, operation)(**params)
            assert len(sent) == 1 and "authorization" in {k.lower() for k in sent[0].headers}
            facts.append(_request_facts(sent[0]))
        assert facts[0] == facts[1], (service, operation)


@pytest.mark.parametrize("kind", ["threads", "aiobotocore"])
async def test_the_operations_a_trimmed_handler_serves_keep_it(kind: str) -> None:
    from dormant.core.clients import trim_handlers

    async with _untrimmed(kind, "dynamodb", 4) as client:
        assert trim_handlers(client) == [
            "generate_idempotent_uuid", "_handle_request_validation_mode_member", "inject_api_version_header_if_needed",
            "rebuild_and_replace_user_agent_handler"]
    async with _answered(kind, "dynamodb", [(200, {})]) as (client, sent):
        await client.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": {"pk": {"S": "a"}}}}])
    token = json.loads(sent[0].body)["ClientRequestToken"]  # an idempotency token, filled by botocore's handler
    assert len(token) == 36


@pytest.mark.parametrize("kind", ["threads", "aiobotocore"])
async def test_a_trimmed_client_retries_throttling_and_parses_errors(kind: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import ClientError
    from botocore.retries.standard import ExponentialBackoff  # type: ignore[import-untyped]

    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)  # retried at once

    throttled = (400, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "slow down"})
    found = (200, {"Items": [{"pk": {"S": "a"}, "z": {"B": "AAE="}}], "Count": 1, "ScannedCount": 1})
    async with _answered(kind, "dynamodb", [throttled, throttled, found]) as (client, sent):
        answer = await client.query(TableName="t", KeyConditionExpression="pk = :pk",
                                    ExpressionAttributeValues={":pk": {"S": "a"}})
    assert answer["Items"] == [{"pk": {"S": "a"}, "z": {"B": b"\x00\x01"}}]
    assert len(sent) == 3  # retried twice, each attempt signed again
    headers = [{k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in r.headers.items()} for r in sent]
    assert all(h["authorization"].startswith("AWS4-HMAC-SHA256 ") for h in headers)
    assert [h["amz-sdk-request"].split(";")[0] for h in headers] == ["attempt=1", "attempt=2", "attempt=3"]

    failed = (400, {"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
                    "message": "The conditional request failed"})
    async with _answered(kind, "dynamodb", [failed]) as (client, sent):
        with pytest.raises(ClientError) as raised:
            await client.put_item(TableName="t", Item={"pk": {"S": "a"}},
                                  ConditionExpression="attribute_not_exists(pk)")
        assert raised.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
        assert len(sent) == 1  # never retried
        from dormant.dynamodb.requests import Table

        assert await Table(client, "t").put({"pk": {"S": "a"}}, "attribute_not_exists(pk)") is False


# -- TLS: a plain-HTTP endpoint loads no CA bundle (about 60 ms of CPU per aiobotocore client) -----------------------
class _RecordingSession:
    """A session that records what `create_client` is given, and makes the client with the real one."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.given: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def create_client(self, service: str, **kwargs: Any) -> Any:
        self.given.append(kwargs)
        return self.real.create_client(service, **kwargs)


@pytest.mark.parametrize("kind", ["threads", "aiobotocore"])
@pytest.mark.parametrize(("endpoint", "verify"), [("http://127.0.0.1:1", False), ("HTTP://localhost:8000", False),
                                                  ("https://dynamodb.eu-west-1.amazonaws.com", None), (None, None)])
async def test_only_a_plain_http_endpoint_skips_certificate_verification(kind: str, endpoint: str | None,
                                                                         verify: bool | None) -> None:
    session = _RecordingSession(botocore_session() if kind == "threads" else aiobotocore_session())
    settings = Settings(endpoint_url=endpoint, region="eu-west-1")
    async with open_client("dynamodb", settings, kind=kind, session=session):  # type: ignore[arg-type]
        pass
    [given] = session.given
    assert given.get("endpoint_url") == endpoint
    assert given.get("verify") is verify  # None: botocore's default, verified against the CA bundle


# -- one service-model loader per process: a new aiobotocore session per client read and parsed botocore's JSON again
async def test_a_second_session_s_client_reads_no_model_file_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.loaders import JSONFileLoader  # type: ignore[import-untyped]

    read: list[str] = []
    load_file = JSONFileLoader.load_file

    def counted(self: Any, file_path: str) -> Any:
        read.append(file_path)
        return load_file(self, file_path)

    monkeypatch.setattr(JSONFileLoader, "load_file", counted)
    first, second = aiobotocore_session(), aiobotocore_session()
    assert first is not second  # (a session per client: its credential lock is bound to one event loop)
    assert first.get_component("data_loader") is second.get_component("data_loader")
    async with open_client("dynamodb", SETTINGS, kind="aiobotocore", session=first):
        pass
    read.clear()  # (what the first client read, if this process had not read it before)
    async with open_client("dynamodb", SETTINGS, kind="aiobotocore", session=second) as client:
        assert read == []
        assert client.meta.service_model.service_name == "dynamodb"
