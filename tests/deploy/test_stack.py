"""template.yaml, translated by the SAM translator, created as a CloudFormation stack in a moto server: the
resources exist with the shapes the code needs, the functions' environment resolves to them, and the real
Lambda handlers (functions/api, functions/worker) configured by that environment serve a request end to end.

moto runs no Lambda code (that needs Docker) and its CloudFormation creates no API Gateway v2 resources,
no CloudWatch alarms, no table TTL, no point-in-time recovery, and of the bucket only its encryption and tags (no
lifecycle, public access block, ownership controls or bucket policy): tests/deploy/test_terraform.py checks those on
the resources Terraform creates through moto's APIs, tests/deploy/test_parity.py checks both files;
the event sources are played by the test, as Lambda's poller would (receive, invoke, delete what did not fail).
Deleting the stack leaves the table, the bucket and the queues, with their data.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import io
import json
import os
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlparse

import boto3  # type: ignore[import-untyped]
import pytest

from dormant.dynamodb.store import table_definition
from dormant.settings import Settings
from dormant.sqs.poller import lambda_event
from tests.api.support import http_api_v2_event, lambda_body
from tests.deploy.describe import Description
from tests.deploy.support import ARTIFACT_BUCKET, REGION, ROOT
from tests.servers import MotoServer, fake_aws_environment, scrubbed_variables

STACK = "dormant"
TOKEN_PARAMETER = "/dormant/inspector-token"
TOKEN = "token-from-ssm"
CALLER = "arn:aws:iam::123456789012:user/deployer"


@dataclass
class Stack:
    endpoint: str
    resources: dict[str, dict[str, Any]]  # logical id -> describe_stack_resources entry
    outputs: dict[str, str]
    clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        if service not in self.clients:
            self.clients[service] = boto3.client(service, endpoint_url=self.endpoint, region_name=REGION)
        return self.clients[service]

    def physical(self, logical: str) -> str:
        return str(self.resources[logical]["PhysicalResourceId"])

    def function(self, logical: str) -> dict[str, Any]:
        configuration: dict[str, Any] = self.client("lambda").get_function_configuration(
            FunctionName=self.physical(logical))
        return configuration


def _for_moto(translated: dict[str, Any]) -> dict[str, Any]:
    """moto's CloudFormation cannot create Lambda versions and aliases (AutoPublishAlias): the alias `live` is
    replaced by its function, which is what it invokes; everything else stays as translated."""
    resources = translated["Resources"]
    aliases = {name: r["Properties"]["FunctionName"] for name, r in resources.items()
               if r["Type"] == "AWS::Lambda::Alias"}
    kept = {name: r for name, r in resources.items()
            if r["Type"] not in ("AWS::Lambda::Alias", "AWS::Lambda::Version")}

    def swap(node: Any) -> Any:
        if isinstance(node, dict):
            if set(node) == {"Ref"} and node["Ref"] in aliases:
                return aliases[node["Ref"]]
            return {key: swap(value) for key, value in node.items()}
        if isinstance(node, list):
            return [swap(item) for item in node]
        if isinstance(node, str):  # an alias in a Fn::Sub string
            for alias, function in aliases.items():
                node = node.replace("${" + alias + "}", "${" + function["Ref"] + ".Arn}")
        return node

    return {**translated, "Resources": swap(kept)}


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def stack(translated: dict[str, Any]) -> Iterator[Stack]:
    with pytest.MonkeyPatch.context() as patch:
        for name in scrubbed_variables():
            patch.delenv(name)
        for name, value in fake_aws_environment().items():
            patch.setenv(name, value)
        server = MotoServer()
        server.start()
        try:
            created = Stack(server.endpoint, {}, {})
            s3 = created.client("s3")
            s3.create_bucket(Bucket=ARTIFACT_BUCKET)
            for resource in translated["Resources"].values():
                code = resource.get("Properties", {}).get("Code") or resource.get("Properties", {}).get("Content")
                if code:  # what `sam package` uploads (moto only stores it)
                    s3.put_object(Bucket=code["S3Bucket"], Key=code["S3Key"], Body=_zip({"placeholder.py": ""}))
            created.client("ssm").put_parameter(Name=TOKEN_PARAMETER, Type="SecureString", Value=TOKEN)
            cloudformation = created.client("cloudformation")
            cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(_for_moto(translated)),
                                        Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"])
            description = cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]
            assert description["StackStatus"] == "CREATE_COMPLETE", description.get("StackStatusReason")
            for resource in cloudformation.describe_stack_resources(StackName=STACK)["StackResources"]:
                if "LogicalResourceId" in resource:  # moto lists API Gateway v2 resources without ids
                    created.resources[resource["LogicalResourceId"]] = resource
            created.outputs = {o["OutputKey"]: o["OutputValue"] for o in description.get("Outputs", [])}
            yield created
        finally:
            server.stop()


def _queue_path(url: str) -> str:
    """/<account>/<name>: moto hands out URLs on its own host; the path identifies the queue."""
    return urlparse(url).path


def test_the_stack_creates_the_table_queues_functions_and_event_sources(stack: Stack) -> None:
    kinds = sorted(r["ResourceType"] for r in stack.resources.values())
    assert kinds.count("AWS::SQS::Queue") == 4
    assert kinds.count("AWS::Lambda::Function") == 2
    assert kinds.count("AWS::Lambda::EventSourceMapping") == 2
    assert kinds.count("AWS::IAM::Role") == 2
    assert kinds.count("AWS::S3::Bucket") == 1
    assert all(r["ResourceStatus"] == "CREATE_COMPLETE" for r in stack.resources.values())

    # the bucket of large values: a name CloudFormation chose (bucket names are global), encrypted at rest
    s3 = stack.client("s3")
    bucket = stack.physical("ValueBucket")
    assert bucket == stack.outputs["ValueBucketName"] and bucket.startswith(f"{STACK}-valuebucket-")
    encryption = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert [rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] for rule in encryption] == ["AES256"]

    table = stack.client("dynamodb").describe_table(TableName=stack.physical("ActorTable"))["Table"]
    expected = table_definition(table["TableName"])
    assert table["KeySchema"] == expected["KeySchema"]
    assert sorted(table["AttributeDefinitions"], key=str) == sorted(expected["AttributeDefinitions"], key=str)
    assert table["LocalSecondaryIndexes"] == [{**index} for index in expected["LocalSecondaryIndexes"]]
    assert table["BillingModeSummary"]["BillingMode"] == expected["BillingMode"] == "PAY_PER_REQUEST"

    sqs = stack.client("sqs")

    def attributes(logical: str) -> dict[str, str]:
        found: dict[str, str] = sqs.get_queue_attributes(QueueUrl=stack.physical(logical),
                                                         AttributeNames=["All"])["Attributes"]
        return found

    wake, timers = attributes("WakeQueue"), attributes("TimerQueue")
    wake_dlq, timers_dlq = attributes("WakeDeadLetterQueue"), attributes("TimerDeadLetterQueue")
    settings = Settings(_env_file=None)
    assert wake["FifoQueue"] == wake_dlq["FifoQueue"] == "true" and "FifoQueue" not in timers
    assert (wake["DeduplicationScope"], wake["FifoThroughputLimit"]) == ("messageGroup", "perMessageGroupId")
    assert json.loads(wake["RedrivePolicy"]) == {"deadLetterTargetArn": wake_dlq["QueueArn"],
                                                 "maxReceiveCount": settings.max_receives}
    assert json.loads(timers["RedrivePolicy"]) == {"deadLetterTargetArn": timers_dlq["QueueArn"],
                                                   "maxReceiveCount": settings.max_receives}
    worker = stack.function("WorkerFunction")
    assert int(wake["VisibilityTimeout"]) >= 6 * worker["Timeout"]
    assert int(timers["VisibilityTimeout"]) >= 6 * worker["Timeout"]

    mappings = {m["EventSourceArn"]: m for m in stack.client("lambda").list_event_source_mappings(
        FunctionName=worker["FunctionName"])["EventSourceMappings"]}
    assert set(mappings) == {wake["QueueArn"], timers["QueueArn"]}
    assert all(m["FunctionResponseTypes"] == ["ReportBatchItemFailures"] for m in mappings.values())
    assert mappings[wake["QueueArn"]]["BatchSize"] == 10
    assert "MaximumBatchingWindowInSeconds" not in mappings[wake["QueueArn"]]  # FIFO: no batching window
    assert mappings[timers["QueueArn"]]["MaximumBatchingWindowInSeconds"] == 1
    # limits: the event sources start at most WorkerMaxConcurrency each, within the reserved concurrency
    assert all(m["ScalingConfig"] == {"MaximumConcurrency": 5} for m in mappings.values())
    lam = stack.client("lambda")
    assert lam.get_function_concurrency(FunctionName=worker["FunctionName"])["ReservedConcurrentExecutions"] == 10
    api = stack.function("ApiFunction")
    assert lam.get_function_concurrency(FunctionName=api["FunctionName"])["ReservedConcurrentExecutions"] == 20
    # the data: encrypted queues, the table protected from deletion
    for attributes_of in (wake, timers, wake_dlq, timers_dlq):
        assert attributes_of["SqsManagedSseEnabled"] == "true"
    assert table["DeletionProtectionEnabled"] in (True, "true")  # moto keeps the parameter's string


@pytest.mark.parametrize("logical", ["WorkerRole", "ApiRole"])
def test_the_roles_grant_what_the_template_says(stack: Stack, logical: str, sam_description: Description) -> None:
    """The inline policies of the created roles, with the stack's ARNs put back as tokens, are the described
    statements (which tests/deploy/code_rules.py checks against the code)."""
    iam = stack.client("iam")
    name = stack.physical(logical)
    tokens = {}
    for role_id, token in (("ActorTable", "table"), ("WakeQueue", "wake"), ("TimerQueue", "timers"),
                           ("WakeDeadLetterQueue", "wake_dlq"), ("TimerDeadLetterQueue", "timers_dlq")):
        tokens[_arn(stack, role_id)] = "{" + token + ".arn}"
    tokens[f"arn:aws:s3:::{stack.physical('ValueBucket')}"] = "{values.arn}"
    for group in ("WorkerLogGroup", "ApiLogGroup"):
        arn = stack.client("logs").describe_log_groups(logGroupNamePrefix=stack.physical(group))["logGroups"][0]["arn"]
        tokens[arn.removesuffix(":*")] = "{" + group.replace("LogGroup", "").lower() + "_logs.arn}"
    tokens[f"arn:aws:ssm:{REGION}:123456789012:"] = "arn:{AWS::Partition}:ssm:{AWS::Region}:{AWS::AccountId}:"
    # moto's CloudFormation cannot create the WebSocket API: its reference stays "${RealtimeApi}" (stage "dev")
    tokens[f"arn:aws:execute-api:{REGION}:123456789012:${{RealtimeApi}}/dev/"] = \
        "{realtime_api.execution_arn}/{param.stage}/"
    statements = set()
    for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
        document = iam.get_role_policy(RoleName=name, PolicyName=policy)["PolicyDocument"]
        if isinstance(document, str):  # moto's CloudFormation stores the document as Python's repr of it
            document = ast.literal_eval(document)
        for s in document["Statement"]:
            resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
            actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
            statements.add((s.get("Sid"), s["Effect"], frozenset(actions), frozenset(
                _tokenized(resource, tokens).removesuffix(":*") for resource in resources)))
    role = "worker_role" if logical == "WorkerRole" else "api_role"
    # A log group's Arn attribute ends in ":*" on AWS; moto's leaves it off
    expected = {(sid, effect, actions, frozenset(r.replace("{param.inspector_token_parameter}", TOKEN_PARAMETER)
                                                 .removesuffix(":*") for r in resources))
                for sid, effect, actions, resources in sam_description["iam"][role]["statements"]}
    assert statements == expected


def _arn(stack: Stack, logical: str) -> str:
    if logical == "ActorTable":
        return str(stack.client("dynamodb").describe_table(TableName=stack.physical(logical))["Table"]["TableArn"])
    return str(stack.client("sqs").get_queue_attributes(QueueUrl=stack.physical(logical), AttributeNames=[
        "QueueArn"])["Attributes"]["QueueArn"])


def _tokenized(value: str, tokens: dict[str, str]) -> str:
    for concrete in sorted(tokens, key=len, reverse=True):
        value = value.replace(concrete, tokens[concrete])
    return value


@pytest.mark.parametrize("logical", ["WorkerFunction", "ApiFunction"])
def test_the_function_environment_resolves_to_the_stack(stack: Stack, logical: str) -> None:
    function = stack.function(logical)
    env = {name: str(value) for name, value in function["Environment"]["Variables"].items()}
    assert env["DORMANT_TABLE"] == stack.physical("ActorTable") == stack.outputs["TableName"]
    assert env["DORMANT_BUCKET"] == stack.physical("ValueBucket") == stack.outputs["ValueBucketName"]
    sqs = stack.client("sqs")
    for variable, logical_queue in (("DORMANT_QUEUE", "WakeQueue"), ("DORMANT_TIMER_QUEUE", "TimerQueue"),
                                    ("DORMANT_DLQ", "TimerDeadLetterQueue"),
                                    ("DORMANT_FIFO_DLQ", "WakeDeadLetterQueue")):
        url = env[f"{variable}_URL"]
        assert _queue_path(url) == _queue_path(stack.physical(logical_queue))
        assert _queue_path(sqs.get_queue_url(QueueName=env[f"{variable}_NAME"])["QueueUrl"]) == _queue_path(url)
    settings = Settings(_env_file=None, **{name.removeprefix("DORMANT_").lower(): value  # type: ignore[arg-type]
                                           for name, value in env.items()})
    assert settings.table == env["DORMANT_TABLE"] and settings.app == "examples.app:registry"
    assert settings.bucket == env["DORMANT_BUCKET"]
    assert settings.queue_url == env["DORMANT_QUEUE_URL"] and settings.queue_url.endswith(".fifo")
    # the operator token is nowhere in the environment: the API reads it from SSM at run time
    assert settings.inspector_token is None and TOKEN not in json.dumps(function)
    if logical == "ApiFunction":
        assert (settings.inspector_token_parameter, settings.auth_mode) == (TOKEN_PARAMETER, "iam")
    else:
        assert "DORMANT_INSPECTOR_TOKEN_PARAMETER" not in env and "DORMANT_AUTH_MODE" not in env
    role = stack.client("iam").get_role(RoleName=stack.physical(logical.replace("Function", "Role")))["Role"]
    assert function["Role"] == role["Arn"]
    assert function["Handler"] == f"functions.{logical.removesuffix('Function').lower()}.handler.handler"
    assert function["Runtime"] == "python3.13"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _use_environment(patch: pytest.MonkeyPatch, env: dict[str, Any], endpoint: str) -> None:
    """The function's environment as Lambda sets it, plus the endpoint of the moto server."""
    for name in [name for name in os.environ if name.startswith("DORMANT_")]:
        patch.delenv(name)
    for name, value in env.items():
        # moto's CloudFormation creates no API Gateway API: a reference to one stays "${HttpApi}" in a Fn::Sub (an
        # id in its place keeps the URL valid; no subscription exists, so nothing is ever posted to it)
        patch.setenv(name, re.sub(r"\$\{(\w+)\}", lambda found: found.group(1).lower(), str(value)))
    patch.setenv("DORMANT_ENDPOINT_URL", endpoint)


def test_the_lambda_handlers_serve_a_request_on_the_stack(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    lam, sqs = stack.client("lambda"), stack.client("sqs")
    worker_config, api_config = stack.function("WorkerFunction"), stack.function("ApiFunction")
    # moto would run the function in Docker when a message arrives: the test plays the event source instead
    for mapping in lam.list_event_source_mappings(FunctionName=worker_config["FunctionName"])["EventSourceMappings"]:
        lam.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)

    _use_environment(monkeypatch, api_config["Environment"]["Variables"], stack.endpoint)
    api = _load("deploy_api_handler", ROOT / "functions" / "api" / "handler.py")
    _use_environment(monkeypatch, worker_config["Environment"]["Variables"], stack.endpoint)
    worker = _load("deploy_worker_handler", ROOT / "functions" / "worker" / "handler.py")

    loop = asyncio.new_event_loop()  # the API container's loop, which Mangum drives
    asyncio.set_event_loop(loop)

    def call(method: str, target: str, body: Any = None, signed: bool = True, **headers: str) -> tuple[int, Any]:
        raw = None if body is None else json.dumps(body).encode()
        asyncio.set_event_loop(loop)  # the worker's asyncio.Runner made its own loop current in between
        event = http_api_v2_event(method, target, body=raw, headers={"content-type": "application/json", **headers})
        if signed:  # what API Gateway's AWS_IAM authorization (AuthMode=iam, the default) passes on
            event["requestContext"]["authorizer"] = {"iam": {"userArn": CALLER, "accountId": "123456789012"}}
        response = api.handler(event, None)
        return response["statusCode"], lambda_body(response)

    def play_event_sources() -> int:
        """Receive, invoke the worker, delete what it did not report failed; until both queues are empty."""
        batches = 0
        for _ in range(20):
            delivered = False
            for logical in ("WakeQueue", "TimerQueue"):
                url = stack.physical(logical)
                messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"],
                                               WaitTimeSeconds=0).get("Messages", [])
                if not messages:
                    continue
                delivered, batches = True, batches + 1
                arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
                response = worker.handler(lambda_event(messages, arn=arn, region=REGION), None)
                assert response == {"batchItemFailures": []}
                for message in messages:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            if not delivered:
                return batches
        raise AssertionError("the queues did not drain")

    try:
        assert call("PUT", "/actors/workflow-counter/deploy", signed=False)[0] == 401
        assert call("PUT", "/actors/workflow-counter/deploy") == (
            201, {"actor": "workflow-counter", "key": ["deploy"], "created": True})
        status, body = call("POST", "/actors/workflow-counter/deploy/queues/counter", {"delta": 5})
        assert (status, body["status"]) == (202, "queued")
        assert play_event_sources() >= 1
        assert call("GET", "/actors/workflow-counter/deploy/state") == (200, {"value": 5, "processed": 1})
        # an operator route: the signed caller first (behind $default like every route), then the operator
        # token the API read from the SSM parameter
        assert call("GET", "/actors/workflow-counter/deploy/history")[0] == 401
        assert call("GET", "/actors/workflow-counter/deploy/history", signed=False,
                    authorization=f"Bearer {TOKEN}")[0] == 401
        status, history = call("GET", "/actors/workflow-counter/deploy/history",
                               **{"x-dormant-operator-token": TOKEN})
        assert status == 200 and "counter-loop" in {entry["location"].split("/")[0] for entry in history}
        status, body = call("GET", "/actors/workflow-counter/deploy/status")
        assert (status, body["workflow"], body["waiting_for"]["queues"]) == (200, "sleeping", ["counter"])
    finally:
        loop.run_until_complete(api.app.state.services.aclose())
        loop.close()
        asyncio.set_event_loop(None)
        worker.worker.close()


def test_deleting_the_stack_keeps_the_table_the_bucket_and_the_queues_with_their_data(stack: Stack) -> None:
    """DeletionPolicy/UpdateReplacePolicy Retain: the stack goes, the data stays (runs last: it deletes the stack)."""
    dynamodb, sqs, s3 = stack.client("dynamodb"), stack.client("sqs"), stack.client("s3")
    table, bucket = stack.physical("ActorTable"), stack.physical("ValueBucket")
    before = dynamodb.scan(TableName=table)["Count"]
    assert before > 0  # the previous test stored an actor
    sqs.send_message(QueueUrl=stack.physical("TimerDeadLetterQueue"), MessageBody="kept")
    s3.put_object(Bucket=bucket, Key="actors/0123/value", Body=b"a large value")
    stack.client("cloudformation").delete_stack(StackName=STACK)
    assert dynamodb.scan(TableName=table)["Count"] == before
    assert s3.get_object(Bucket=bucket, Key="actors/0123/value")["Body"].read() == b"a large value"
    for logical in ("WakeQueue", "TimerQueue", "WakeDeadLetterQueue", "TimerDeadLetterQueue"):
        assert sqs.get_queue_attributes(QueueUrl=stack.physical(logical), AttributeNames=["QueueArn"])
    kept = sqs.receive_message(QueueUrl=stack.physical("TimerDeadLetterQueue"))["Messages"]
    assert [m["Body"] for m in kept] == ["kept"]
    functions = {f["FunctionName"] for f in stack.client("lambda").list_functions()["Functions"]}
    assert stack.physical("ApiFunction") not in functions and stack.physical("WorkerFunction") not in functions
