"""The functions run from what is deployed: the bundle (`make build-WorkerFunction`) and the trimmed layer
(`make build-DependenciesLayer`), built for a Python and run by that bare interpreter (`-S`: no site-packages but
the layer, as on Lambda), against the moto server: for this machine's Python and for Lambda's, 3.13 (template.yaml,
infra/). Both handlers get AWS's own sample events (tests/deploy/events: `sam local generate-event apigateway
http-api-proxy` and `sqs receive-message`), filled in with the request and the received messages, not events
built by dormant's own code. A trim that removes something a handler needs fails here: a service model (the API
reads its operator token from SSM, both functions keep large values in S3), a package (pydantic.v1 is trimmed,
FastAPI only probes it), or a module the import path needs.

The S3 calls of large values (PutObject, GetObject, ListObjectsV2, DeleteObjects) are made here through the functions'
own client factory (dormant.aws.clients.open_client with the handlers' settings: botocore clients in threads, as
deployed), in the bundle's interpreter: what the offload code will call, whether or not it is in this bundle."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import pytest

from dormant.dynamodb.table import table_definition
from tests.deploy.support import run, tool_environment

HOST_PYTHON = "{}.{}".format(*sys.version_info[:2])
LAMBDA_PYTHON = "3.13"
EVENTS = Path(__file__).with_name("events")
TOKEN = "operator-token-in-ssm"
# Each Python's layer is built with its test: pip fetches its wheels (about 45 s, over 120 s on a busy machine).
pytestmark = pytest.mark.timeout(360)

SCRIPT = r"""
import json, sys
import boto3
import functions.api.handler as api
import functions.worker.handler as worker
from tests_event import http_event, sqs_event

def call(method, target, body=None, token=None):
    response = api.handler(http_event(method, target, body, token), None)
    return response["statusCode"], json.loads(response["body"] or "null")

answers = {"create": call("PUT", "/actors/workflow-counter/layer"),
           "send": call("POST", "/actors/workflow-counter/layer/queues/counter", {"delta": 7})}
sqs = boto3.client("sqs")
queue = sys.argv[1]
messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                               MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"]).get("Messages", [])
answers["woken"] = worker.handler(sqs_event(messages, sys.argv[2]), None)
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
answers["python"] = "%d.%d" % sys.version_info[:2]
print(json.dumps(answers))
"""

EVENT_MODULE = r'''
import base64, copy, json

def http_event(method, target, body=None, token=None):
    """AWS's sample HTTP API (payload 2.0) event, for this request: a base64 body, as API Gateway sends one."""
    with open("apigateway-http-api-proxy.json") as sample:
        event = json.load(sample)
    event.pop("queryStringParameters", None)
    event.pop("pathParameters", None)
    event["rawPath"], event["rawQueryString"] = target, ""
    event["requestContext"]["http"].update(method=method, path=target)
    headers = {**event["headers"], "host": event["requestContext"]["domainName"], "content-type": "application/json"}
    if token:
        headers["authorization"] = "Bearer " + token
    event["headers"] = headers
    event["body"] = None if body is None else base64.b64encode(json.dumps(body).encode()).decode()
    event["isBase64Encoded"] = body is not None
    return event

def sqs_event(messages, arn):
    """AWS's sample SQS event, one record per received message (its attributes over the sample's)."""
    with open("sqs-receive-message.json") as sample:
        template = json.load(sample)["Records"][0]
    records = []
    for message in messages:
        record = copy.deepcopy(template)
        record.update(messageId=message["MessageId"], receiptHandle=message["ReceiptHandle"], body=message["Body"],
                      md5OfBody=message["MD5OfBody"], eventSourceARN=arn, awsRegion=arn.split(":")[3])
        record["attributes"] = {**record["attributes"], **message.get("Attributes", {})}
        record["messageAttributes"] = {
            name: {"stringValue": value.get("StringValue"), "stringListValues": [], "binaryListValues": [],
                   "dataType": value["DataType"]} for name, value in message.get("MessageAttributes", {}).items()}
        records.append(record)
    return {"Records": records}
'''


def python_for(version: str) -> str | None:
    """The bare interpreter of `version`: this one, or python3.13 on PATH or from pyenv (as the Makefile finds it)."""
    if version == HOST_PYTHON:
        return str(getattr(sys, "_base_executable", sys.executable))
    command = shutil.which(f"python{version}")
    if command is None:
        return None
    found = subprocess.run([command, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                           env={**os.environ, "PYENV_VERSION": version}, timeout=120, check=False)
    return found.stdout.strip() or None if found.returncode == 0 else None


@pytest.fixture(scope="module", params=sorted({HOST_PYTHON, LAMBDA_PYTHON}))
def deployed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str, str]:
    """(bundle, layer site, interpreter) as `sam build` makes them, for a Python and this machine's architecture.
    Lambda's Python is required where `make check` runs (DORMANT_PYTHON313_REQUIRED), skipped elsewhere without it."""
    version = request.param
    python = python_for(version)
    if python is None:
        message = f"no python{version} here (pyenv's 3.13, or python3.13 on PATH)"
        if os.environ.get("DORMANT_PYTHON313_REQUIRED"):
            pytest.fail(message)
        pytest.skip(message)
    root = tmp_path_factory.mktemp(f"lambda-tree-{version}")
    platform_tag = f"manylinux2014_{platform.machine()}"
    for target, folder, extra in (("build-WorkerFunction", "bundle", []),
                                  ("build-DependenciesLayer", "layer", [f"LAMBDA_PLATFORM={platform_tag}"])):
        result = run(["make", "--no-print-directory", target, f"ARTIFACTS_DIR={root / folder}",
                      f"LAMBDA_PYTHON={version}", *extra], env=tool_environment(), timeout=300)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "bundle", root / "layer" / "python", python, version


def test_both_handlers_run_from_the_bundle_and_the_trimmed_layer(deployed: tuple[Path, Path, str, str],
                                                                 moto_server: str, tmp_path: Path) -> None:
    bundle, layer, python, version = deployed
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
    for sample in EVENTS.glob("*.json"):
        shutil.copy(sample, tmp_path / sample.name)
    env = tool_environment(
        PYTHONPATH=":".join([str(bundle), str(layer), str(tmp_path)]), PYTHONNOUSERSITE="1",
        AWS_ENDPOINT_URL=moto_server, AWS_ACCESS_KEY_ID="layer", AWS_SECRET_ACCESS_KEY="layer",
        DORMANT_APP="examples.counter:registry", DORMANT_TABLE=table, DORMANT_QUEUE_URL=wake,
        DORMANT_TIMER_QUEUE_URL=timers, DORMANT_AUTH_MODE="none", DORMANT_INSPECTOR_TOKEN_PARAMETER=parameter,
        DORMANT_BUCKET=bucket)
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
    assert answers["python"] == version  # the handlers ran on the Python the layer was built for
