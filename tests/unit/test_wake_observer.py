"""The worker's wake-up record (dormant.aws.observability.Observer): what it reads from the batch's records and the
meter, however the worker hands them over."""

from __future__ import annotations

import json
import time
from typing import Any

from dormant.aws.metering import Meter
from dormant.aws.observability import Observer
from dormant.ports import ActorRef
from dormant.runtime.wake import WakeReport
from dormant.sqs.transport import WakeMessage

REF = ActorRef(name="counter", key=("k",))


def record(body: str, sent_ms: int | None) -> dict[str, Any]:
    attributes = {"ApproximateReceiveCount": "1"} | ({"SentTimestamp": str(sent_ms)} if sent_ms is not None else {})
    return {"messageId": "m", "body": body, "attributes": attributes}


def test_the_due_times_the_worker_parsed_give_the_ready_time_the_bodies_give() -> None:
    now = int(time.time() * 1000)
    bodies = [WakeMessage.for_ref(REF).model_dump_json(exclude_defaults=True),
              WakeMessage.for_ref(REF, due=now / 1000 + 5.5).model_dump_json(exclude_defaults=True),
              WakeMessage.for_ref(REF, due=now / 1000 - 30).model_dump_json(exclude_defaults=True)]
    for batch in ([record(bodies[0], now)], [record(bodies[1], now - 9000), record(bodies[0], now - 4000)],
                  [record(bodies[2], now), record(bodies[1], None)], [record(bodies[0], None)], []):
        observer = Observer(tracing=False)
        dues = [WakeMessage.model_validate_json(r["body"]).due for r in batch]
        read = observer.begin(REF, batch)  # the bodies parsed again
        given = observer.begin(REF, batch, dues=dues)
        assert given.ready_at == read.ready_at, batch
        expected = [max(int(r["attributes"]["SentTimestamp"]) / 1000, json.loads(r["body"]).get("due") or 0)
                    for r in batch if "SentTimestamp" in r["attributes"]]
        assert read.ready_at == min(expected, default=None)


def test_the_record_counts_requests_as_the_meter_does() -> None:
    meter = Meter()
    meter.requests.update({"dynamodb.Query": 2, "dynamodb.PutItem": 1, "dynamodb.BatchWriteItem": 3,
                           "dynamodb.DescribeTable": 4, "sqs.SendMessage": 5, "sqs.DeleteMessageBatch": 1,
                           "s3.PutObject": 7, "sqs": 9, "dynamodbx.Query": 2, "dynamodb.Query.x": 1})
    observer = Observer(tracing=False)
    done = observer.finished(observer.begin(REF, []), WakeReport(ref=REF, outcome="sleeping"), meter)
    assert done.requests == {"dynamodb_reads": meter.dynamodb_reads, "dynamodb_writes": meter.dynamodb_writes,
                             "sqs": meter.sqs_requests} == {"dynamodb_reads": 2, "dynamodb_writes": 4, "sqs": 6}
    assert observer.finished(observer.begin(REF, []), WakeReport(ref=REF, outcome="sleeping")).requests == {}


def test_each_wake_up_has_an_id_of_its_own_of_16_hex_digits() -> None:
    observer = Observer(tracing=False)
    ids = {observer.begin(REF, []).wake_id for _ in range(200)}
    assert len(ids) == 200 and all(len(i) == 16 and int(i, 16) >= 0 for i in ids)
