"""The project's moto server (dormant.dev.moto): SQS safe under concurrency, long polls that react at once and
block nobody, a Query that reads one partition yet answers exactly as moto does, output that never blocks it."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.config import Config

from dormant.dynamodb.table import PENDING_INDEX, table_definition
from tests.servers import MotoServer
from tests.waiting import until


@pytest.fixture(scope="module")
def server() -> Iterator[MotoServer]:
    started = MotoServer()
    started.start()
    yield started
    started.stop()


def client(server: MotoServer, service: str) -> Any:
    return boto3.client(service, endpoint_url=server.endpoint, region_name="us-east-1",
                        config=Config(max_pool_connections=64, retries={"max_attempts": 2},
                                      read_timeout=30))


def test_fifo_groups_stay_deliverable_under_concurrent_senders_and_consumers(server: MotoServer) -> None:
    """The failure seen before SQS was serialized: groups left with visible messages never received."""
    sqs = client(server, "sqs")
    url = sqs.create_queue(QueueName=f"stress-{uuid.uuid4().hex[:8]}.fifo", Attributes={
        "FifoQueue": "true", "VisibilityTimeout": "30", "DeduplicationScope": "messageGroup",
        "FifoThroughputLimit": "perMessageGroupId"})["QueueUrl"]
    groups, per_group = 40, 10
    received: Counter[str] = Counter()
    order: dict[str, list[int]] = {}
    lock = threading.Lock()

    def send(group: int) -> None:
        for n in range(per_group):
            sqs.send_message(QueueUrl=url, MessageBody=f"{group}:{n}", MessageGroupId=f"g{group}",
                             MessageDeduplicationId=uuid.uuid4().hex)

    def consume(stop_at: float) -> None:
        while time.monotonic() < stop_at:
            with lock:
                if sum(received.values()) >= groups * per_group:
                    return
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                           AttributeNames=["All"]).get("Messages", [])
            for message in messages:
                group, n = message["Body"].split(":")
                with lock:
                    received[message["Body"]] += 1
                    order.setdefault(group, []).append(int(n))
            if messages:
                sqs.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])

    stop_at = time.monotonic() + 60
    with ThreadPoolExecutor(max_workers=16) as pool:
        consumers = [pool.submit(consume, stop_at) for _ in range(8)]
        senders = [pool.submit(send, g) for g in range(groups)]
        for future in senders + consumers:
            future.result()
    assert len(received) == groups * per_group, f"{groups * per_group - len(received)} message(s) never received"
    assert set(received.values()) == {1}
    assert all(numbers == sorted(numbers) for numbers in order.values()), "FIFO order broken within a group"
    left = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert left["Attributes"]["ApproximateNumberOfMessages"] == "0"


def test_a_long_poll_answers_as_soon_as_a_message_is_sent_and_blocks_no_other_request(server: MotoServer) -> None:
    sqs, dynamodb = client(server, "sqs"), client(server, "dynamodb")
    url = sqs.create_queue(QueueName=f"poll-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    answers: list[tuple[list[Any], float]] = []  # (messages, when the poll returned)

    def poll() -> None:
        messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10).get("Messages", [])
        answers.append((messages, time.monotonic()))

    on_the_wire = threading.Semaphore(0)
    sqs.meta.events.register("before-send.sqs.ReceiveMessage", lambda **_: on_the_wire.release())
    pollers = [threading.Thread(target=poll) for _ in range(3)]  # more long polls in progress than one lock
    for thread in pollers:
        thread.start()
    for _ in pollers:  # each poll's request is being sent
        assert on_the_wire.acquire(timeout=30), "a long poll was never sent"
    # Long polls in progress hold no lock: other SQS and DynamoDB requests go through meanwhile.
    other = sqs.create_queue(QueueName=f"other-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=other, MessageBody="elsewhere")
    assert sqs.receive_message(QueueUrl=other, WaitTimeSeconds=0)["Messages"][0]["Body"] == "elsewhere"
    dynamodb.list_tables()
    assert all(thread.is_alive() for thread in pollers)
    sent = time.monotonic()
    sqs.send_message(QueueUrl=url, MessageBody="now")
    until(lambda: answers, timeout=15, what="no long poll answered the message")
    got = list(answers)
    for _ in pollers[1:]:  # the other polls end with a message each, not at the end of their 10 s
        sqs.send_message(QueueUrl=url, MessageBody="release")
    for thread in pollers:
        thread.join(timeout=15)
    assert len(got) == 1 and [m["Body"] for m in got[0][0]] == ["now"]
    # The one that got it answered when the message came (its 10 s wait had 9.5 s left), not at the end.
    assert got[0][1] - sent < 5.0, f"answered {got[0][1] - sent:.2f} s after the send"
    assert sorted(m["Body"] for messages, _ in answers for m in messages) == ["now", "release", "release"]


def test_a_long_poll_sees_a_delayed_message_when_it_becomes_visible(server: MotoServer) -> None:
    sqs = client(server, "sqs")
    url = sqs.create_queue(QueueName=f"delay-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=1)
    started = time.monotonic()
    messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", [])
    assert [m["Body"] for m in messages] == ["later"]
    assert time.monotonic() - started < 4.5  # not held to the end of the wait


def test_an_omitted_wait_uses_the_queue_default(server: MotoServer) -> None:
    sqs = client(server, "sqs")
    url = sqs.create_queue(QueueName=f"default-{uuid.uuid4().hex[:8]}",
                           Attributes={"ReceiveMessageWaitTimeSeconds": "1"})["QueueUrl"]
    started = time.monotonic()
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []
    assert time.monotonic() - started >= 0.9


def _fill(dynamodb: Any, table: str, partitions: int, per_partition: int) -> None:
    for p in range(partitions):
        for s in range(per_partition):
            item = {"pk": {"S": f"actor-{p:03d}"}, "sk": {"S": f"c#{s:03d}"}, "n": {"N": str(s)}}
            if s % 3 == 0:  # in the sparse `pending` index
                item["pq"] = {"S": f"q{per_partition - s:03d}"}
            dynamodb.put_item(TableName=table, Item=item)


def test_query_reads_one_partition_with_moto_semantics(server: MotoServer) -> None:
    dynamodb = client(server, "dynamodb")
    table = f"query-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(**table_definition(table))
    _fill(dynamodb, table, partitions=12, per_partition=30)

    def query(**kwargs: Any) -> list[str]:
        keys, start = [], None
        while True:
            page = dynamodb.query(TableName=table, **kwargs, **({"ExclusiveStartKey": start} if start else {}))
            keys += [item["sk"]["S"] for item in page["Items"]]
            start = page.get("LastEvaluatedKey")
            if not start:
                return keys

    pk = {":p": {"S": "actor-007"}}
    everything = [f"c#{s:03d}" for s in range(30)]
    assert query(KeyConditionExpression="pk = :p", ExpressionAttributeValues=pk) == everything
    assert query(KeyConditionExpression="pk = :p", ExpressionAttributeValues=pk, Limit=7) == everything
    assert query(KeyConditionExpression="pk = :p", ExpressionAttributeValues=pk, ScanIndexForward=False) == \
        everything[::-1]
    assert query(KeyConditionExpression="pk = :p AND begins_with(sk, :c)",
                 ExpressionAttributeValues={**pk, ":c": {"S": "c#01"}}) == [f"c#{s:03d}" for s in range(10, 20)]
    assert query(KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b", ExpressionAttributeValues={
        **pk, ":a": {"S": "c#005"}, ":b": {"S": "c#008"}}) == ["c#005", "c#006", "c#007", "c#008"]
    assert query(KeyConditionExpression="pk = :p", FilterExpression="n > :five",
                 ExpressionAttributeValues={**pk, ":five": {"N": "25"}}) == everything[26:]
    # The local index: only items with `pq`, sorted by it (descending sk here), paginated.
    indexed = [f"c#{s:03d}" for s in range(30) if s % 3 == 0][::-1]
    assert query(IndexName=PENDING_INDEX, KeyConditionExpression="pk = :p", ExpressionAttributeValues=pk,
                 Limit=4) == indexed
    assert query(KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "nobody"}}) == []
    # A Scan still sees the whole table.
    assert dynamodb.scan(TableName=table, Select="COUNT")["Count"] == 12 * 30


def test_query_cost_does_not_grow_with_other_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted, not timed: the key comparisons moto makes for a one-partition Query are the same with 2 and
    with 40 partitions in the table (unpatched, moto sorts and compares every item of the table)."""
    from moto import mock_aws
    from moto.dynamodb.models.dynamo_type import DynamoType

    from dormant.dev import partitions

    partitions.install()
    comparisons = Counter[str]()
    for name in ("__eq__", "__lt__"):
        original = getattr(DynamoType, name)

        def counting(self: Any, other: Any, _original: Any = original, _name: str = name) -> Any:
            comparisons[_name] += 1
            return _original(self, other)

        monkeypatch.setattr(DynamoType, name, counting)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(**table_definition("flat"))

        def one_query() -> tuple[list[Any], int]:
            comparisons.clear()
            items = dynamodb.query(TableName="flat", KeyConditionExpression="pk = :p",
                                   ExpressionAttributeValues={":p": {"S": "actor-001"}})["Items"]
            return items, sum(comparisons.values())

        _fill(dynamodb, "flat", partitions=2, per_partition=5)
        small_items, small = one_query()
        _fill(dynamodb, "flat", partitions=40, per_partition=5)
        large_items, large = one_query()
    assert small_items == large_items and len(large_items) == 5
    assert large == small, f"{small} comparisons with 2 partitions, {large} with 40"


def test_many_requests_never_fill_an_output_pipe(tmp_path: Any) -> None:
    """The server logs no line per request (400 would make ~40 KB): its output stays small."""
    server = MotoServer()
    server.start()
    try:
        sqs = client(server, "sqs")
        url = sqs.create_queue(QueueName="quiet")["QueueUrl"]
        for _ in range(400):
            sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
        assert len(server.output()) < 2000 and "GET" not in server.output() and "POST" not in server.output()
    finally:
        server.stop()


def test_idle_long_polls_leave_the_server_idle(server: MotoServer) -> None:
    """Waiting happens on a condition, not by spinning: 3 long polls of 3 s on an empty queue cost the server a
    small fraction of those 3 s of CPU (a spinning wait costs all of it, and starves every sender)."""
    import os
    from pathlib import Path

    assert server._process is not None

    def cpu() -> float:
        fields = Path(f"/proc/{server._process.pid}/stat").read_text().rpartition(")")[2].split()  # type: ignore[union-attr]
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    sqs = client(server, "sqs")
    url = sqs.create_queue(QueueName=f"idle-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    before = cpu()
    with ThreadPoolExecutor(max_workers=3) as pool:
        answers = list(pool.map(lambda _: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=3), range(3)))
    used = cpu() - before
    assert all(not answer.get("Messages") for answer in answers)
    assert used < 1.0, f"the server spent {used:.2f} s of CPU on 9 s of idle long polls"


def test_lazy_queue_attributes_equal_motos_own() -> None:
    """The lazy mapping (dormant.dev.attributes) has exactly moto's keys and values, for every kind of queue."""
    from moto import mock_aws
    from moto.sqs.models import Queue, sqs_backends

    from dormant.dev.attributes import LazyAttributes

    original = Queue.__dict__["attributes"]
    computed = original.fget if isinstance(original, property) and original.fget is not LazyAttributes else None
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        dlq = sqs.create_queue(QueueName="dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sqs.create_queue(QueueName="wake.fifo", Attributes={
            "FifoQueue": "true", "ContentBasedDeduplication": "false", "DeduplicationScope": "messageGroup",
            "FifoThroughputLimit": "perMessageGroupId", "VisibilityTimeout": "7",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3})})
        timers = sqs.create_queue(QueueName="timers", Attributes={"KmsMasterKeyId": "alias/x",
                                                                  "ReceiveMessageWaitTimeSeconds": "2"})["QueueUrl"]
        sqs.send_message(QueueUrl=timers, MessageBody="later", DelaySeconds=5)
        sqs.send_message(QueueUrl=timers, MessageBody="now")
        queues = sqs_backends["123456789012"]["us-east-1"].queues
        for queue in queues.values():
            lazy = LazyAttributes(queue)
            reference = computed(queue) if computed is not None else dict(lazy)
            assert dict(lazy) == reference and list(lazy) == list(reference)
        assert dict(LazyAttributes(queues["timers"]))["ApproximateNumberOfMessagesDelayed"] == 1
        assert LazyAttributes(queues["wake.fifo"])["ContentBasedDeduplication"] == "false"


def test_plain_json_item_responses_equal_motos_serializer(monkeypatch: pytest.MonkeyPatch) -> None:
    """dormant.dev.responses renders what moto's serializer renders, for every kind of attribute value."""
    from moto import mock_aws
    from moto.dynamodb.responses import DynamoResult

    from dormant.dev import responses

    pairs: list[tuple[str, Any, Any]] = []
    responses.install()
    fast = DynamoResult.execute_result

    def both(self: Any, context: Any) -> Any:
        from moto.core.responses import ActionResult

        reference = ActionResult.execute_result(self, context)  # moto's own serializer
        pairs.append((context.operation_model.name, fast(self, context), reference))
        return reference

    monkeypatch.setattr(DynamoResult, "execute_result", both)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(**table_definition("t"))
        item = {"pk": {"S": "a"}, "sk": {"S": "1"}, "b": {"B": b"\x00\xffbinary"}, "n": {"N": "1.50"},
                "l": {"L": [{"S": "x"}, {"N": "2"}, {"NULL": True}]}, "pq": {"S": "p"},
                "m": {"M": {"k": {"BOOL": False}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]},
                            "bs": {"BS": [b"x", b"y"]}}}}
        dynamodb.put_item(TableName="t", Item=item)
        dynamodb.put_item(TableName="t", Item={**item, "sk": {"S": "2"}}, ReturnValues="ALL_OLD")
        dynamodb.get_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "1"}})
        dynamodb.query(TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={
            ":p": {"S": "a"}}, Limit=1, ReturnConsumedCapacity="TOTAL")
        dynamodb.query(TableName="t", IndexName=PENDING_INDEX, KeyConditionExpression="pk = :p",
                       ExpressionAttributeValues={":p": {"S": "a"}}, ProjectionExpression="sk, b")
        dynamodb.batch_get_item(RequestItems={"t": {"Keys": [{"pk": {"S": "a"}, "sk": {"S": "1"}},
                                                              {"pk": {"S": "a"}, "sk": {"S": "9"}}]}})
        dynamodb.delete_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "2"}}, ReturnValues="ALL_OLD")
        dynamodb.scan(TableName="t")
    seen = {name for name, _, _ in pairs}
    assert {"PutItem", "GetItem", "Query", "BatchGetItem", "DeleteItem", "Scan"} <= seen
    for name, (status, headers, body), (ref_status, ref_headers, ref_body) in pairs:
        assert (status, headers.get("Content-Type"), json.loads(body)) == (
            ref_status, ref_headers.get("Content-Type"), json.loads(ref_body)), name


def _list_tables_request(body: bytes = b"{}") -> tuple[bytes, dict[str, str]]:
    return body, {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.ListTables",
                  "Authorization": "AWS4-HMAC-SHA256 Credential=k/20261201/us-east-1/dynamodb/aws4_request, "
                                   "SignedHeaders=host, Signature=0"}


@pytest.fixture(scope="module")
def kept_alive() -> Iterator[MotoServer]:
    started = MotoServer(extra=["--keep-alive"])  # as `dormant dev` starts it (dormant.dev.embedded)
    started.start()
    yield started
    started.stop()


def test_connections_are_kept_alive_once_their_body_is_read(kept_alive: MotoServer) -> None:
    """werkzeug closes every connection; `dormant dev`'s server keeps a drained one open, so a client's next
    request reuses it (under load that was ~300 new connections and server threads a second)."""
    import http.client

    host, _, port = kept_alive.endpoint.removeprefix("http://").partition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    sockets = set()
    for _ in range(5):
        body, headers = _list_tables_request()
        connection.request("POST", "/", body=body, headers=headers)
        response = connection.getresponse()
        assert response.status == 200 and "TableNames" in json.loads(response.read())
        assert (response.getheader("Connection") or "").lower() != "close"
        sockets.add(id(connection.sock))
    assert len(sockets) == 1, "each request needed a new connection"
    # A client that asks to close gets it closed; the next request opens a new connection and still works.
    body, headers = _list_tables_request()
    connection.request("POST", "/", body=body, headers={**headers, "Connection": "close"})
    response = connection.getresponse()
    response.read()
    assert response.status == 200 and connection.sock is None
    connection.request("POST", "/", body=body, headers=headers)
    assert connection.getresponse().status == 200
    connection.close()


def test_kept_alive_connections_send_without_nagles_delay() -> None:
    """A response is two writes (headers, body): with Nagle's algorithm on, the body waited for the kept-alive
    client's delayed ACK of the headers, and every long poll answered ~42 ms after the message that ended it.
    socketserver's StreamRequestHandler sets TCP_NODELAY on each connection when this attribute is true."""
    import socketserver

    from moto.moto_server.werkzeug_app import MotoRequestHandler

    from dormant.dev.keepalive import keep_alive_handler

    handler = keep_alive_handler(MotoRequestHandler)
    assert issubclass(handler, socketserver.StreamRequestHandler)
    assert handler.disable_nagle_algorithm is True
    assert MotoRequestHandler.disable_nagle_algorithm is False  # what werkzeug's own handler would do


def test_without_keep_alive_each_response_closes_its_connection(server: MotoServer) -> None:
    """The suite's shared servers run without --keep-alive: clients with pooled connections survive their
    restarts without retries."""
    import http.client

    host, _, port = server.endpoint.removeprefix("http://").partition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    body, headers = _list_tables_request()
    connection.request("POST", "/", body=body, headers=headers)
    response = connection.getresponse()
    response.read()
    assert response.status == 200 and (response.getheader("Connection") or "").lower() == "close"
    connection.close()


# -- S3 through the gate ------------------------------------------------------------------------------------------
S3_SIGNED = "AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"


def _environ(method: str, path: str, *, service: str = "s3", query: str = "", host: str = "127.0.0.1:5000",
             body: bytes = b"") -> dict[str, Any]:
    import io

    environ: dict[str, Any] = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "HTTP_HOST": host,
                               "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))}
    if service == "s3":
        environ["HTTP_AUTHORIZATION"] = S3_SIGNED
    elif service == "dynamodb":
        environ["HTTP_X_AMZ_TARGET"] = "DynamoDB_20120810.GetItem"
    return environ


class _Recorder:
    """A WSGI app standing for moto: how many requests of each service ran at once, and whether anything ran beside
    a bucket-level change."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.overlaps: set[tuple[str, str]] = set()
        self.beside_bucket_changes = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        service = "dynamodb" if "HTTP_X_AMZ_TARGET" in environ else "s3"
        bucket_change = service == "s3" and environ["REQUEST_METHOD"] == "PUT" and environ["PATH_INFO"].count("/") == 1
        assert environ["wsgi.input"].read() == environ["dormant.test.body"]  # the prefetched body reaches moto
        with self.lock:
            for other, count in self.running.items():
                if count:
                    self.overlaps.add((service, other))
                    self.beside_bucket_changes += bucket_change
            self.running[service] += 1
            self.running["bucket-change"] += bucket_change
            self.beside_bucket_changes += bool(self.running["bucket-change"]) and not bucket_change
            self.most[service] = max(self.most[service], self.running[service])
        time.sleep(0.02)
        with self.lock:
            self.running[service] -= 1
            self.running["bucket-change"] -= bucket_change
        start_response("200 OK", [])
        return [b""]


def test_s3_requests_run_one_at_a_time_beside_dynamodb_and_bucket_changes_beside_nothing() -> None:
    """moto's S3 is not safe under concurrent requests (module docstring of dormant.dev.gate): the gate runs them one
    at a time, without holding up DynamoDB; a bucket-level change runs alone."""
    from dormant.dev.gate import RequestGate, classify

    classify(_environ("PUT", "/warm/up"))  # imports moto's S3 (as the server has at its start)
    recorder = _Recorder()
    gate = RequestGate(recorder)

    def run_together(requests: list[dict[str, Any]]) -> None:
        for environ in requests:
            environ["dormant.test.body"] = environ["wsgi.input"].getvalue()
        with ThreadPoolExecutor(max_workers=len(requests)) as pool:
            list(pool.map(lambda environ: b"".join(gate(environ, lambda status, headers: None)), requests))

    dynamodb = [_environ("POST", "/", service="dynamodb", body=b"{}") for _ in range(8)]
    run_together([*(_environ("PUT", f"/values/actors/a/{n}", body=b"x" * n) for n in range(8)),
                  *(_environ("GET", f"/values/actors/a/{n}") for n in range(8)),
                  _environ("POST", "/values", query="delete", body=b"<Delete/>"), *dynamodb])
    assert recorder.most == Counter({"s3": 1, "dynamodb": 1})
    assert ("s3", "dynamodb") in recorder.overlaps or ("dynamodb", "s3") in recorder.overlaps
    # a bucket-level change takes every lock: nothing runs beside it
    run_together([_environ("PUT", "/other-bucket"), *(_environ("PUT", f"/values/b/{n}") for n in range(4)),
                  *(_environ("POST", "/", service="dynamodb", body=b"{}") for _ in range(4)),
                  _environ("PUT", "/third-bucket")])
    assert recorder.beside_bucket_changes == 0
    assert recorder.most == Counter({"s3": 1, "dynamodb": 1})


@pytest.mark.parametrize(("method", "path", "query", "host", "kind"), [
    ("GET", "/values/actors/a/1", "", "127.0.0.1:5000", "read"),
    ("HEAD", "/values", "", "127.0.0.1:5000", "read"),
    ("PUT", "/values/actors/a/1", "", "127.0.0.1:5000", "object"),
    ("PUT", "/values/actors/a/1", "tagging", "127.0.0.1:5000", "object"),
    ("DELETE", "/values/actors/a/1", "", "localhost:5000", "object"),
    ("POST", "/values", "delete", "127.0.0.1:5000", "object"),  # DeleteObjects
    ("POST", "/values/actors/a/1", "uploads", "127.0.0.1:5000", "object"),
    ("PUT", "/values", "", "127.0.0.1:5000", "bucket"),
    ("PUT", "/values/", "lifecycle", "127.0.0.1:5000", "bucket"),
    ("DELETE", "/values", "", "127.0.0.1:5000", "bucket"),
    ("PUT", "/actors/a/1", "", "values.localhost:4566", "object"),  # virtual-hosted: the bucket is in the host
    ("PUT", "/", "", "values.localhost:4566", "bucket"),
])
def test_s3_requests_are_told_apart_as_moto_reads_them(method: str, path: str, query: str, host: str,
                                                        kind: str) -> None:
    from dormant.dev.gate import classify

    assert classify(_environ(method, path, query=query, host=host)) == ("s3", kind)


def test_s3_control_signed_as_s3_is_left_to_moto() -> None:
    from dormant.dev.gate import classify

    control = _environ("GET", "/v20180820/configuration/publicAccessBlock")
    assert classify(control) == (None, "/v20180820/configuration/publicAccessBlock")
