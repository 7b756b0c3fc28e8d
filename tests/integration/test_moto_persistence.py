"""The embedded moto server's data directory (dormant.dev.persistence): everything acknowledged survives a
kill -9 (DynamoDB items, SQS messages, S3 objects byte for byte), a torn journal tail is dropped, compaction keeps
one generation, object bytes stay out of snapshots, and a directory we cannot read is refused with a way out, never
half-loaded."""

from __future__ import annotations

import os
import pickle
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from dormant.dynamodb.table import PENDING_INDEX, table_definition
from tests.servers import MotoServer


def clients(server: MotoServer) -> tuple[Any, Any]:
    kwargs = {"endpoint_url": server.endpoint, "region_name": "us-east-1"}
    return boto3.client("dynamodb", **kwargs), boto3.client("sqs", **kwargs)


def _restart_same_port(server: MotoServer, *, kill: bool) -> None:
    if kill:
        server.kill()
    else:
        server.stop_process()
    server.start()


@pytest.fixture
def server(tmp_path: Path) -> Any:
    started = MotoServer(tmp_path / "data")
    started.start()
    yield started
    started.stop()


def _seed(dynamodb: Any, sqs: Any) -> tuple[str, str]:
    dynamodb.create_table(**table_definition("t"))
    for n in range(20):
        dynamodb.put_item(TableName="t", Item={"pk": {"S": f"a{n % 4}"}, "sk": {"S": f"c#{n}"}, "v": {"N": str(n)},
                                               **({"pq": {"S": f"p{n}"}} if n % 2 else {})})
    dynamodb.delete_item(TableName="t", Key={"pk": {"S": "a0"}, "sk": {"S": "c#0"}})
    dynamodb.update_item(TableName="t", Key={"pk": {"S": "a1"}, "sk": {"S": "c#1"}},
                         UpdateExpression="SET v = :v", ExpressionAttributeValues={":v": {"N": "100"}})
    dynamodb.batch_write_item(RequestItems={"t": [
        {"PutRequest": {"Item": {"pk": {"S": "b"}, "sk": {"S": "x"}, "v": {"N": "1"}}}},
        {"DeleteRequest": {"Key": {"pk": {"S": "a2"}, "sk": {"S": "c#2"}}}}]})
    fifo = sqs.create_queue(QueueName="wake.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    timers = sqs.create_queue(QueueName="timers")["QueueUrl"]
    for n in range(3):
        sqs.send_message(QueueUrl=fifo, MessageBody=f"m{n}", MessageGroupId="g", MessageDeduplicationId=f"d{n}")
    sqs.send_message(QueueUrl=timers, MessageBody="soon", DelaySeconds=2)
    sqs.send_message(QueueUrl=timers, MessageBody="gone")
    gone = sqs.receive_message(QueueUrl=timers, WaitTimeSeconds=0)["Messages"][0]
    assert gone["Body"] == "gone"
    sqs.delete_message(QueueUrl=timers, ReceiptHandle=gone["ReceiptHandle"])
    # One message in flight when the server dies: it must come back.
    in_flight = sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=1, VisibilityTimeout=300)["Messages"]
    assert in_flight[0]["Body"] == "m0"
    return fifo, timers


def _expect_seeded(dynamodb: Any, sqs: Any, fifo: str, timers: str) -> None:
    items = {(i["pk"]["S"], i["sk"]["S"]): int(i["v"]["N"]) for i in dynamodb.scan(TableName="t")["Items"]}
    expected = {(f"a{n % 4}", f"c#{n}"): n for n in range(20)} | {("b", "x"): 1, ("a1", "c#1"): 100}
    del expected[("a0", "c#0")], expected[("a2", "c#2")]
    assert items == expected
    pending = dynamodb.query(TableName="t", IndexName=PENDING_INDEX, KeyConditionExpression="pk = :p",
                             ExpressionAttributeValues={":p": {"S": "a1"}})["Items"]
    assert [i["sk"]["S"] for i in pending] == ["c#1", "c#13", "c#17", "c#5", "c#9"]
    bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10,
                                                      WaitTimeSeconds=1).get("Messages", [])]
    assert bodies == ["m0", "m1", "m2"]  # in order, the in-flight one visible again
    later = sqs.receive_message(QueueUrl=timers, WaitTimeSeconds=5).get("Messages", [])
    assert [m["Body"] for m in later] == ["soon"]  # the deleted one stays deleted
    assert dynamodb.describe_table(TableName="t")["Table"]["LocalSecondaryIndexes"][0]["IndexName"] == PENDING_INDEX


@pytest.mark.parametrize("kill", [True, False], ids=["kill -9", "SIGTERM"])
def test_everything_acknowledged_survives_a_restart(server: MotoServer, kill: bool) -> None:
    fifo, timers = _seed(*clients(server))
    _restart_same_port(server, kill=kill)
    _expect_seeded(*clients(server), fifo, timers)


def test_a_torn_journal_tail_is_dropped_and_appends_continue_after_it(server: MotoServer) -> None:
    dynamodb, _ = clients(server)
    dynamodb.create_table(**table_definition("t"))
    dynamodb.put_item(TableName="t", Item={"pk": {"S": "a"}, "sk": {"S": "1"}})
    server.kill()
    journal = next(server.data_dir.glob("journal-*.log"))  # type: ignore[union-attr]
    with open(journal, "ab") as handle:  # half a record, as a power cut could leave it
        handle.write(b"\x40\x00\x00\x00\x01\x02\x03\x04partial")
    server.start()
    dynamodb, _ = clients(server)
    dynamodb.put_item(TableName="t", Item={"pk": {"S": "a"}, "sk": {"S": "2"}})
    server.kill()
    server.start()
    dynamodb, _ = clients(server)
    keys = [i["sk"]["S"] for i in dynamodb.query(TableName="t", KeyConditionExpression="pk = :p",
                                                  ExpressionAttributeValues={":p": {"S": "a"}})["Items"]]
    assert keys == ["1", "2"]
    assert "a torn last record was dropped" in server.output()


def test_compaction_keeps_one_generation_and_loses_nothing(tmp_path: Path) -> None:
    server = MotoServer(tmp_path / "data", extra=["--compact-bytes", "20000"])
    server.start()
    try:
        dynamodb, _ = clients(server)
        dynamodb.create_table(**table_definition("t"))
        for n in range(200):
            dynamodb.put_item(TableName="t", Item={"pk": {"S": f"a{n % 10}"}, "sk": {"S": f"{n:04d}"},
                                                   "d": {"S": "x" * 200}})
        files = sorted(p.name for p in (tmp_path / "data").iterdir())
        snapshots = [f for f in files if f.startswith("snapshot-")]
        journals = [f for f in files if f.startswith("journal-")]
        assert len(snapshots) == 1 and len(journals) == 1, files
        generation = int(snapshots[0].removeprefix("snapshot-").removesuffix(".pickle"))
        assert generation > 3  # table creation + several size-triggered compactions
        server.kill()
        server.start()
        assert dynamodb.scan(TableName="t", Select="COUNT")["Count"] == 200
    finally:
        server.stop()


def test_a_directory_written_by_another_moto_is_refused_with_a_way_out(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with open(data / "snapshot-3.pickle", "wb") as handle:
        pickle.dump({"moto": "0.0.1", "dynamodb": {}, "sqs": {}}, handle)
    server = MotoServer(data)
    try:
        with pytest.raises(RuntimeError, match=r"moto 0\.0\.1.*--fresh"):
            server.start()
    finally:
        server.stop()
    assert (data / "snapshot-3.pickle").exists()  # nothing deleted behind the user's back


def test_two_servers_never_share_a_data_directory(server: MotoServer) -> None:
    second = MotoServer(server.data_dir)
    try:
        with pytest.raises(RuntimeError, match="in use by another"):
            second.start()
    finally:
        second.stop()
    dynamodb, _ = clients(server)
    dynamodb.list_tables()  # the first one is unharmed


def test_a_reset_is_persisted_too(server: MotoServer) -> None:
    import urllib.request

    dynamodb, _ = clients(server)
    dynamodb.create_table(**table_definition(f"t{uuid.uuid4().hex[:6]}"))
    s3 = s3_client(server)
    s3.create_bucket(Bucket="values")
    s3.put_object(Bucket="values", Key="k", Body=b"v")
    urllib.request.urlopen(urllib.request.Request(f"{server.endpoint}/moto-api/reset", method="POST")).close()
    _restart_same_port(server, kill=True)
    dynamodb, _ = clients(server)
    assert dynamodb.list_tables()["TableNames"] == []
    assert s3_client(server).list_buckets()["Buckets"] == []
    assert os.listdir(server.data_dir)  # type: ignore[arg-type]
    assert _object_files(server.data_dir) == {}  # type: ignore[arg-type]


# -- S3 (dormant.dev.s3journal, dormant.dev.objectfiles) ------------------------------------------------------------
BIG = 20 * 1024 * 1024


def s3_client(server: MotoServer) -> Any:
    return boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1")


def _object_files(data: Path) -> dict[str, int]:
    return {f"{p.parent.name}{p.name}": p.stat().st_size for p in (data / "objects").glob("*/*")}


def _concurrent_writes(server: MotoServer) -> dict[str, bytes]:
    """S3 and DynamoDB writes side by side (each service journals under its own lock); the objects left."""
    from concurrent.futures import ThreadPoolExecutor

    dynamodb, _ = clients(server)
    dynamodb.create_table(**table_definition("t"))
    s3 = s3_client(server)
    bodies = {f"actors/e{n % 5}/{n}": os.urandom(40_000 + n) for n in range(30)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda name: s3.put_object(Bucket="values", Key=name, Body=bodies[name]), bodies))
        list(pool.map(lambda n: dynamodb.put_item(TableName="t", Item={"pk": {"S": f"a{n % 5}"},
                                                                        "sk": {"S": f"{n:03d}"}}), range(30)))
        gone = [name for name in bodies if name.endswith(("1", "7"))]
        list(pool.map(lambda name: s3.delete_object(Bucket="values", Key=name), gone))
    return {name: body for name, body in bodies.items() if name not in gone}


def _unsigned_writes(server: MotoServer) -> dict[str, bytes]:
    """A presigned URL's signature is in its query string, an unsigned request reaches moto's S3 as its default
    service: the gate must see both as S3 writes all the same."""
    import urllib.request

    presigned = s3_client(server).generate_presigned_url("put_object", Params={"Bucket": "values", "Key": "presigned"})
    written = {"presigned": b"uploaded", "anonymous": b"no signature"}
    for url, body in ((presigned, written["presigned"]), (f"{server.endpoint}/values/anonymous", written["anonymous"])):
        request = urllib.request.Request(url, data=body, method="PUT",
                                         headers={"Content-Type": "application/octet-stream"})
        urllib.request.urlopen(request).close()
    return written


def test_s3_objects_survive_a_kill_9_byte_for_byte(server: MotoServer) -> None:
    """Puts, overwrites, both kinds of delete, metadata, tags, an upload in progress, concurrent writes beside
    DynamoDB's, presigned and unsigned writes, all acknowledged before the kill: after it, every object reads back
    byte for byte, deleted ones stay deleted, the upload completes."""
    s3 = s3_client(server)
    s3.create_bucket(Bucket="values")
    others = {**_concurrent_writes(server), **_unsigned_writes(server)}
    big = os.urandom(BIG)
    s3.put_object(Bucket="values", Key="actors/a/big", Body=big, ContentType="application/json",
                  Metadata={"version": "7"})
    s3.put_object(Bucket="values", Key="actors/a/small", Body=b"{\"v\": 1}")
    s3.put_object(Bucket="values", Key="actors/a/small", Body=b"{\"v\": 2}")  # overwritten: the new bytes count
    s3.put_object(Bucket="values", Key="ephemeral/b/tagged", Body=b"t", Tagging="kind=response")
    for name in ("actors/c/1", "actors/c/2", "actors/c/3"):
        s3.put_object(Bucket="values", Key=name, Body=name.encode())
    deleted = s3.delete_objects(Bucket="values", Delete={"Objects": [{"Key": "actors/c/1"}, {"Key": "actors/c/2"}]})
    assert len(deleted["Deleted"]) == 2
    s3.delete_object(Bucket="values", Key="actors/c/3")
    upload = s3.create_multipart_upload(Bucket="values", Key="actors/d/parts")["UploadId"]
    part = s3.upload_part(Bucket="values", Key="actors/d/parts", UploadId=upload, PartNumber=1, Body=b"p" * 1000)

    _restart_same_port(server, kill=True)
    s3 = s3_client(server)
    listed = {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket="values")["Contents"]}
    assert listed == {"actors/a/big": BIG, "actors/a/small": 8, "ephemeral/b/tagged": 1,
                      **{name: len(body) for name, body in others.items()}}
    assert all(s3.get_object(Bucket="values", Key=name)["Body"].read() == body for name, body in others.items())
    assert clients(server)[0].scan(TableName="t", Select="COUNT")["Count"] == 30
    got = s3.get_object(Bucket="values", Key="actors/a/big")
    assert got["Body"].read() == big
    assert (got["ContentType"], got["Metadata"]) == ("application/json", {"version": "7"})
    assert s3.get_object(Bucket="values", Key="actors/a/small")["Body"].read() == b"{\"v\": 2}"
    assert s3.get_object_tagging(Bucket="values", Key="ephemeral/b/tagged")["TagSet"] == [
        {"Key": "kind", "Value": "response"}]
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket="values", Key="actors/c/1")
    s3.complete_multipart_upload(Bucket="values", Key="actors/d/parts", UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert s3.get_object(Bucket="values", Key="actors/d/parts")["Body"].read() == b"p" * 1000
    # ... and what was written after the restart survives the next one too (the journal goes on)
    s3.delete_objects(Bucket="values", Delete={"Objects": [{"Key": name} for name in ["actors/a/small", *others]]})
    _restart_same_port(server, kill=True)
    s3 = s3_client(server)
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="values")["Contents"]) == [
        "actors/a/big", "actors/d/parts", "ephemeral/b/tagged"]
    assert s3.get_object(Bucket="values", Key="actors/a/big")["Body"].read() == big


def test_a_20_mb_object_stays_out_of_the_snapshot_and_the_journal(tmp_path: Path) -> None:
    """Object bytes live in files of their own: a snapshot and the journal hold their names; a file goes with the
    compaction after its object was deleted."""
    data = tmp_path / "data"
    server = MotoServer(data)
    server.start()
    try:
        s3 = s3_client(server)
        s3.create_bucket(Bucket="values")
        big = os.urandom(BIG)
        s3.put_object(Bucket="values", Key="actors/a/big", Body=big)
        s3.put_bucket_tagging(Bucket="values", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})  # compacts
        snapshot = next(data.glob("snapshot-*.pickle"))
        assert snapshot.stat().st_size < 64 * 1024
        assert next(data.glob("journal-*.log")).stat().st_size == 0
        assert list(_object_files(data).values()) == [BIG]
        s3.put_object(Bucket="values", Key="actors/a/big", Body=b"small now")  # the 20 MB file is garbage
        s3.put_bucket_tagging(Bucket="values", Tagging={"TagSet": [{"Key": "k", "Value": "w"}]})
        assert list(_object_files(data).values()) == [len(b"small now")]
        s3.delete_objects(Bucket="values", Delete={"Objects": [{"Key": "actors/a/big"}]})
        server.kill()
        server.start()
        s3 = s3_client(server)
        assert s3.list_objects_v2(Bucket="values").get("KeyCount") == 0
        assert _object_files(data) == {}  # a restart deletes the files of objects deleted since the snapshot
        assert s3.get_bucket_tagging(Bucket="values")["TagSet"] == [{"Key": "k", "Value": "w"}]
    finally:
        server.stop()


def test_a_missing_object_file_drops_that_object_and_says_so(server: MotoServer) -> None:
    """What only a power cut (or a hand in the data directory) leaves: a journaled object without its bytes is not
    served half-read; the others are intact."""
    s3 = s3_client(server)
    s3.create_bucket(Bucket="values")
    s3.put_object(Bucket="values", Key="kept", Body=b"kept")
    s3.put_object(Bucket="values", Key="lost", Body=b"lost bytes")
    server.kill()
    data = server.data_dir
    assert data is not None
    (lost,) = [name for name, size in _object_files(data).items() if size == len(b"lost bytes")]
    (data / "objects" / lost[:2] / lost[2:]).unlink()
    server.start()
    s3 = s3_client(server)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="values")["Contents"]] == ["kept"]
    assert s3.get_object(Bucket="values", Key="kept")["Body"].read() == b"kept"
    assert "dropped s3://values/lost: its object file is missing" in server.output()

