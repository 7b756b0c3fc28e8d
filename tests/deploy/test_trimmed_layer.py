"""The functions run from what is deployed: the bundle (`make build-WorkerFunction`) and the trimmed layer
(`make build-DependenciesLayer`), built for this machine's Python and run by the bare interpreter (`-S`: no
site-packages but the layer, as on Lambda), against the moto server. A trim that removes something a handler
needs fails here: a service model (the API reads its operator token from SSM, both functions keep large values in
S3), a package (pydantic.v1 is trimmed, FastAPI only probes it), or a module the import path needs.

The S3 calls of large values (PutObject, GetObject, ListObjectsV2, DeleteObjects) are made here through the functions'
own client factory (dormant.aws.clients.open_client with the handlers' settings: botocore clients in threads, as
deployed), in the bundle's interpreter: what the offload code will call, whether or not it is in this bundle."""

from __future__ import annotations

import json
import platform
import sys
import uuid
from pathlib import Path

import boto3
import pytest

from dormant.aws.table import table_definition
from tests.deploy.support import run, tool_environment

HOST_PYTHON = "{}.{}".format(*sys.version_info[:2])
TOKEN = "operator-token-in-ssm"

SCRIPT = r"""
import json, sys
from dormant.aws.poller import lambda_event
import boto3
import functions.api.handler as api
import functions.worker.handler as worker

def call(method, target, body=None, token=None):
    from tests_event import event
    response = api.handler(event(method, target, body, token), None)
    return response["statusCode"], json.loads(response["body"] or "null")

answers = {"create": call("PUT", "/actors/workflow-counter/layer"),
           "send": call("POST", "/actors/workflow-counter/layer/queues/counter", {"delta": 7})}
sqs = boto3.client("sqs")
queue = sys.argv[1]
messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                               MessageSystemAttributeNames=["All"]).get("Messages", [])
answers["woken"] = worker.handler(lambda_event(messages, arn=sys.argv[2], region="us-east-1"), None)
answers["state"] = call("GET", "/actors/workflow-counter/layer/state")
answers["history"] = call("GET", "/actors/workflow-counter/layer/history", token=sys.argv[3])[0]
answers["wrong_token"] = call("GET", "/actors/workflow-counter/layer/history", token="not-it")[0]


async def values():
    from dormant.aws.clients import function_settings, open_client

    settings = function_settings()  # the handlers' settings: DORMANT_BUCKET, botocore clients in threads
    async with open_client("s3", settings) as s3:
        key = "actors/" + "0" * 32 + "/value"
        await s3.put_object(Bucket=settings.bucket, Key=key, Body=b"x" * 40000)
        body = (await s3.get_object(Bucket=settings.bucket, Key=key))["Body"].read()
        listed = await s3.list_objects_v2(Bucket=settings.bucket, Prefix="actors/")
        deleted = await s3.delete_objects(Bucket=settings.bucket, Delete={"Objects": [{"Key": key}]})
        return [settings.aws_clients, len(body), [o["Key"] for o in listed["Contents"]],
                [d["Key"] for d in deleted["Deleted"]]]

import asyncio
answers["values"] = asyncio.run(values())
answers["aiohttp"] = "aiohttp" in sys.modules
answers["pydantic_v1"] = "pydantic.v1" in sys.modules
print(json.dumps(answers))
"""

EVENT_MODULE = r'''
import json

def event(method, target, body=None, token=None):
    headers = {"host": "abc.execute-api.us-east-1.amazonaws.com", "content-type": "application/json"}
    if token:
        headers["authorization"] = "Bearer " + token
    return {"version": "2.0", "routeKey": "$default", "rawPath": target, "rawQueryString": "", "headers": headers,
            "requestContext": {"accountId": "123456789012", "apiId": "abc", "domainName": headers["host"],
                               "domainPrefix": "abc", "requestId": "r", "routeKey": "$default", "stage": "$default",
                               "time": "01/Dec/2026:09:00:00 +0000", "timeEpoch": 1796115600000,
                               "http": {"method": method, "path": target, "protocol": "HTTP/1.1",
                                        "sourceIp": "203.0.113.7", "userAgent": "t"}},
            "body": None if body is None else json.dumps(body), "isBase64Encoded": False}
'''


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(bundle, layer site) as `sam build` makes them, for this machine's Python and architecture."""
    root = tmp_path_factory.mktemp("lambda-tree")
    platform_tag = f"manylinux2014_{platform.machine()}"
    for target, folder, extra in (("build-WorkerFunction", "bundle", []),
                                  ("build-DependenciesLayer", "layer", [f"LAMBDA_PLATFORM={platform_tag}"])):
        result = run(["make", "--no-print-directory", target, f"ARTIFACTS_DIR={root / folder}",
                      f"LAMBDA_PYTHON={HOST_PYTHON}", *extra], env=tool_environment(), timeout=300)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "bundle", root / "layer" / "python"


def test_both_handlers_run_from_the_bundle_and_the_trimmed_layer(deployed: tuple[Path, Path], moto_server: str,
                                                                 tmp_path: Path) -> None:
    bundle, layer = deployed
    suffix = uuid.uuid4().hex[:8]
    aws = {"endpoint_url": moto_server, "region_name": "us-east-1"}
    table = f"layer-{suffix}"
    boto3.client("dynamodb", **aws).create_table(**table_definition(table))
    sqs = boto3.client("sqs", **aws)
    wake = sqs.create_queue(QueueName=f"layer-{suffix}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    timers = sqs.create_queue(QueueName=f"layer-timers-{suffix}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=wake, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    parameter = f"/layer-{suffix}/inspector-token"
    boto3.client("ssm", **aws).put_parameter(Name=parameter, Type="SecureString", Value=TOKEN)
    bucket = f"layer-{suffix}"
    boto3.client("s3", **aws).create_bucket(Bucket=bucket)
    (tmp_path / "tests_event.py").write_text(EVENT_MODULE)
    env = tool_environment(
        PYTHONPATH=":".join([str(bundle), str(layer), str(tmp_path)]), PYTHONNOUSERSITE="1",
        AWS_ENDPOINT_URL=moto_server, AWS_ACCESS_KEY_ID="layer", AWS_SECRET_ACCESS_KEY="layer",
        DORMANT_APP="examples.counter:registry", DORMANT_TABLE=table, DORMANT_QUEUE_URL=wake,
        DORMANT_TIMER_QUEUE_URL=timers, DORMANT_AUTH_MODE="none", DORMANT_INSPECTOR_TOKEN_PARAMETER=parameter,
        DORMANT_BUCKET=bucket)
    python = getattr(sys, "_base_executable", sys.executable)
    result = run([python, "-S", "-c", SCRIPT, wake, arn, TOKEN], cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert answers["create"][0] == 201 and answers["send"][0] == 202, answers
    assert answers["woken"] == {"batchItemFailures": []}
    assert answers["state"] == [200, {"value": 7, "processed": 1}]
    assert (answers["history"], answers["wrong_token"]) == (200, 401)  # the token came from SSM, via the layer
    key = "actors/" + "0" * 32 + "/value"
    assert answers["values"] == ["threads", 40000, [key], [key]]  # S3's model is in the layer
    assert answers["aiohttp"] is False and answers["pydantic_v1"] is False
