"""template.yaml and infra/ describe the same deployment, and that deployment is the one the code needs.

Both are reduced to one description (tests/deploy/describe.py): table keys, indexes and TTL, the bucket of large
values (name, encryption, public access, TLS-only policy, lifecycle), queue attributes, redrive and encryption,
what is retained, function settings, environment and reserved concurrency, event
sources, IAM statements, log groups, the layer, the HTTP API (routes, their authorization, the JWT authorizer,
throttling and access logs), alarms, the parameters' defaults. They must agree in every scenario (auth modes,
an alarm topic, a data name prefix, no reservations), and fit the code (tests/deploy/code_rules.py). Broken
copies of each file prove the comparison can fail.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.apps import registry
from tests.deploy.code_rules import CALLBACK_ROUTES, ROUTES, code_mismatches
from tests.deploy.describe import SCENARIOS, Description, Unsupported, describe_sam, describe_terraform, differences
from tests.deploy.support import INFRA, TEMPLATE, load_template, translate


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_sam_and_terraform_describe_the_same_deployment(scenario: str, translated: dict[str, Any]) -> None:
    values = SCENARIOS[scenario]
    sam, terraform = describe_sam(translated, values), describe_terraform(INFRA, values=values)
    assert differences(sam, terraform) == []
    # the comparison covers every part of the deployment, not an empty shell
    assert set(sam["queues"]) == {"wake", "timers", "wake_dlq", "timers_dlq"}
    assert set(sam["buckets"]) == {"values"} and len(sam["buckets"]["values"]["lifecycle"]) == 2
    jwt = values.get("auth_mode") == "jwt"  # and the $connect authorizer, its role (logs only) and log group
    assert set(sam["functions"]) == {"worker", "api", *(["authorizer"] if jwt else [])}
    assert len(sam["event_sources"]) == 2 and len(sam["alarms"]) == 3
    assert {len(role["statements"]) for name, role in sam["iam"].items() if name != "authorizer_role"} == {7}
    assert ("authorizer_role" in sam["iam"]) == jwt == ("authorizer_logs" in sam["log_groups"])
    assert set(sam["http"]["routes"]) == ROUTES
    assert set(sam["websocket"]["routes"]) == {"$connect", "$disconnect", "$default"}
    assert sam["websocket"]["stage"]["throttling"] == sam["http"]["stage"]["throttling"]
    assert {"api_url", "realtime_url", "table_name", "wake_queue_url", "timer_queue_url"} <= set(sam["outputs"])


def test_the_scenarios_change_what_they_should(translated: dict[str, Any]) -> None:
    """The scenarios are not the same deployment four times."""
    described = {name: describe_sam(translated, values) for name, values in SCENARIOS.items()}
    routes = {name: d["http"]["routes"]["$default"]["authorization"] for name, d in described.items()}
    assert routes == {"defaults": "AWS_IAM", "jwt": "JWT", "none": "NONE", "operations": "AWS_IAM",
                      "traced": "AWS_IAM"}
    connects = {name: d["websocket"]["routes"]["$connect"]["authorization"] for name, d in described.items()}
    assert connects == {"defaults": "AWS_IAM", "jwt": "CUSTOM", "none": "NONE", "operations": "AWS_IAM",
                        "traced": "AWS_IAM"}
    assert [name for name, d in described.items() if d["http"]["authorizers"]] == ["jwt"]
    # jwt: $connect's Lambda authorizer (a WebSocket API has no JWT authorizer), its function, role and logs
    assert [name for name, d in described.items() if d["websocket"]["authorizers"]] == ["jwt"]
    assert [name for name, d in described.items() if "authorizer" in d["functions"]] == ["jwt"]
    jwt_ws = described["jwt"]["websocket"]
    [authorizer] = jwt_ws["authorizers"].values()
    assert authorizer["type"] == "REQUEST" and authorizer["function"] == "authorizer_alias"
    assert jwt_ws["routes"]["$connect"]["authorizer"] == "{realtime_authorizer.id}"
    operations = described["operations"]
    assert operations["tables"]["table"]["name"] == "{param.data_name_prefix}-actors"
    assert operations["buckets"]["values"]["name"] == "{param.value_bucket_name}"
    assert described["defaults"]["buckets"]["values"]["name"] == "{generated}"
    assert operations["functions"]["api"]["reserved_concurrency"] == -1
    assert operations["alarms"]["worker_errors_alarm"]["actions"] == ["{param.alarm_topic_arn}"]
    assert described["defaults"]["alarms"]["worker_errors_alarm"]["actions"] == []
    # traces: the ADOT layer, its wrapper, X-Ray active tracing and X-Ray's write policy, only when asked for
    traced, plain = described["traced"], described["defaults"]
    for role in ("worker", "api"):
        assert traced["functions"][role]["tracing"] == "Active" and plain["functions"][role]["tracing"] == "PassThrough"
        assert traced["functions"][role]["layers"][-1] == "{param.adot_layer_arn}"
        assert len(plain["functions"][role]["layers"]) == 1
        assert traced["functions"][role]["environment"]["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/otel-instrument"
        assert "AWS_LAMBDA_EXEC_WRAPPER" not in plain["functions"][role]["environment"]
    assert {len(role["managed_policies"]) for role in traced["iam"].values()} == {1}
    assert {len(role["managed_policies"]) for role in plain["iam"].values()} == {0}


@pytest.mark.parametrize("side", ["sam", "terraform"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_deployment_fits_the_code(side: str, scenario: str, translated: dict[str, Any]) -> None:
    values = SCENARIOS[scenario]
    description = describe_sam(translated, values) if side == "sam" else describe_terraform(INFRA, values=values)
    assert code_mismatches(description, values) == []
    assert description["tables"]["table"]["keys"] == {"pk": "HASH", "sk": "RANGE"}


OPERATOR_PATHS = {
    "DELETE /actors/{actor}/{key}", "GET /actors/{actor}", "GET /actors/{actor}/{key}/history",
    "GET /actors/{actor}/{key}/inbox", "GET /actors/{actor}/{key}/inspector/export",
    "GET /actors/{actor}/{key}/inspector/workflow-history", "GET /actors/{actor}/attention",
    "GET /actors/{actor}/counts", "POST /actors/{actor}/resume", "POST /actors/{actor}/{key}/resume",
    "POST /actors/{actor}/{key}/terminate"}


def _with_identity(app: Any, authorizer: dict[str, Any]) -> Any:
    """The app behind API Gateway's AWS_IAM authorization: Mangum's scope carries the verified principal."""
    async def gateway(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope = {**scope, "aws.event": {"version": "2.0", "requestContext": {"authorizer": authorizer}}}
        await app(scope, receive, send)
    return gateway


async def test_every_route_needs_the_verified_caller_and_operator_routes_the_token_too() -> None:
    """The deployment has one route, $default, with the auth mode's authorization in front of every path. In the
    app, without a verified identity every /actors route is 401, the operator routes too, even with the operator
    token; with one, the operator routes are still 401 until the operator token comes beside it."""
    settings = Settings(auth_mode="iam", inspector_token="the-token")  # type: ignore[arg-type]
    principal = {"iam": {"userArn": "arn:aws:iam::123456789012:user/ops", "accountId": "123456789012"}}
    async with TestEnv(registry) as env:
        await env.client.get_or_create("account", ["a"]).send("deposit", {"amount": 1})
        await env.run_until_idle()
        app = create_app(registry, settings, service=env.service)
        routes = [(r.path, method) for r in _routes(app.routes) if r.path.startswith("/actors")
                  for method in sorted(r.methods)]
        anonymous = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")
        signed = httpx.AsyncClient(transport=httpx.ASGITransport(app=_with_identity(app, principal)),
                                   base_url="http://api")
        async with anonymous, signed:
            guarded = []
            for path, method in routes:
                concrete = path.replace("{actor}", "account").replace("{key}", "a").replace(
                    "{queue}", "deposit").replace("{action}", "get_state").replace("{version}", "1")
                for headers in ({}, {"Authorization": "Bearer the-token"}, {"X-Dormant-Operator-Token": "the-token"}):
                    response = await anonymous.request(method, concrete, headers=headers)
                    assert response.status_code == 401, (path, headers, response.text)
                    message = response.json()["error"]["message"]
                    assert "SigV4" in message or "request context" in message, (path, message)
                if f"{method} {path}" not in OPERATOR_PATHS:
                    continue
                guarded.append(f"{method} {path}")
                response = await signed.request(method, concrete)
                assert response.status_code == 401 and "operator token" in response.json()["error"]["message"], path
                wrong = await signed.request(method, concrete, headers={"X-Dormant-Operator-Token": "nope"})
                assert wrong.status_code == 401, path
                allowed = await signed.request(method, concrete, headers={"X-Dormant-Operator-Token": "the-token"})
                assert allowed.status_code == 200, (path, allowed.text)
    assert set(guarded) == OPERATOR_PATHS


async def test_the_callback_routes_are_the_only_ones_without_a_caller_and_the_token_guards_them() -> None:
    """Both deployments route POST/GET /callbacks/{token} without authorization (CALLBACK_ROUTES, checked above for
    every scenario). In the app those are the only routes that serve a request with no verified caller (beside the
    static pages and the OpenAPI document), and what guards them is the token: one that is not a token is 400, one
    no callback has is 404, and neither reads or writes an actor."""
    settings = Settings(auth_mode="iam", inspector_token="the-token")  # type: ignore[arg-type]
    static = {"GET /openapi.json", "HEAD /openapi.json", "GET /ui", "GET /ui/", "GET /ui/config.json",
              "GET /ui/assets/{name}", "GET /docs/assets/{name}", "GET /docs"}
    async with TestEnv(registry) as env:
        app = create_app(registry, settings, service=env.service)
        open_routes = {f"{method} {r.path}" for r in _routes(app.routes) if not r.path.startswith("/actors")
                       for method in r.methods}
        assert open_routes - static == CALLBACK_ROUTES
        anonymous = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")
        async with anonymous:
            for body in ({"result": 1}, {"heartbeat": True}):
                response = await anonymous.post("/callbacks/not-a-token", json=body)
                assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_callback_token")
                response = await anonymous.post("/callbacks/dcb_" + "A" * 43, json=body)
                assert (response.status_code, response.json()["error"]["code"]) == (404, "callback_not_found")
            response = await anonymous.get("/callbacks/dcb_" + "A" * 43)
            assert response.status_code == 404
        assert env.store.actor_ids() == []


def _routes(routes: list[Any]) -> list[Any]:
    """The app's routes, those of included routers too (FastAPI wraps them)."""
    found = []
    for route in routes:
        if hasattr(route, "original_router"):
            found += _routes(route.original_router.routes)
        elif hasattr(route, "path") and hasattr(route, "methods"):
            found.append(route)
    return found


CALLBACK_ROUTE_TF = ('route_key          = "POST /callbacks/{token}"\n'
                     '  target             = "integrations/${aws_apigatewayv2_integration.api.id}"\n'
                     "  authorization_type = ")


def _terraform_with(old: str, new: str, values: dict[str, Any] | None = None) -> Description:
    texts = {path.name: path.read_text() for path in INFRA.glob("*.tf")}
    holding = [name for name, text in texts.items() if old in text]
    assert len(holding) == 1, f"the broken copy needs {old!r} in exactly one infra/ file (found {holding})"
    texts[holding[0]] = texts[holding[0]].replace(old, new, 1)
    return describe_terraform(INFRA, texts, values)


@pytest.mark.parametrize(("old", "new", "where", "code_rule"), [
    ('range_key                   = "sk"', 'range_key                   = "sort"', "tables.table.keys",
     "table keys"),
    (CALLBACK_ROUTE_TF + '"NONE"', CALLBACK_ROUTE_TF + "local.authorization_type", "http.routes",
     "an outside system holds only the token"),
    ('"dynamodb:Query", "dynamodb:UpdateItem"]', '"dynamodb:Query"]', "iam.",
     "api_role grants"),
    ("batch_size              = 10", "batch_size              = 20", "event_sources",
     "a FIFO queue takes no batching window and at most 10 messages"),
    ("maxReceiveCount     = var.max_receives\n  })\n  tags = local.tags\n\n  lifecycle {\n    prevent_destroy = true\n"
     "  }\n}\n\nresource \"aws_sqs_queue\" \"timers\"",
     "maxReceiveCount     = 3\n  })\n  tags = local.tags\n\n  lifecycle {\n    prevent_destroy = true\n"
     "  }\n}\n\nresource \"aws_sqs_queue\" \"timers\"",
     "queues.wake.redrive.max_receives", "queue wake redrive"),
    ('  sqs_managed_sse_enabled   = true\n  tags                      = local.tags\n\n  lifecycle {\n'
     '    prevent_destroy = true\n  }\n}\n\nresource "aws_sqs_queue" "timers_dlq"',
     '  tags = local.tags\n}\n\nresource "aws_sqs_queue" "timers_dlq"',
     "queues.wake_dlq.", "queue wake_dlq: must be encrypted at rest and retained"),
    ('authorization_type = var.auth_mode == "iam" ? "AWS_IAM"', 'authorization_type = var.auth_mode == "iam" ? "NONE"',
     "http.routes.$default.authorization", "auth mode iam"),
    ("DORMANT_INSPECTOR_TOKEN_PARAMETER = var.inspector_token_parameter",
     "DORMANT_INSPECTOR_TOKEN = var.inspector_token_parameter",
     "functions.api.environment", "DORMANT_INSPECTOR_TOKEN puts the operator token in the environment"),
    ("    throttling_burst_limit = var.throttling_burst_limit\n", "",
     "http.stage.throttling.burst", "stage throttling"),
    ('resources = ["arn:${data.aws_partition.current.partition}:ssm:',
     'resources = ["arn:${data.aws_partition.current.partition}:ssm:*:',
     "iam.api_role.statements", "api_role grants"),
    ("reserved_concurrent_executions = var.api_reserved_concurrency",
     "reserved_concurrent_executions = var.worker_reserved_concurrency",
     "functions.api.reserved_concurrency", "api reserved concurrency"),
    ("  ok_actions          = local.alarm_actions\n  tags                = local.tags\n}\n\nresource "
     "\"aws_cloudwatch_metric_alarm\" \"worker_errors\"",
     "  tags                = local.tags\n}\n\nresource \"aws_cloudwatch_metric_alarm\" \"worker_errors\"",
     "alarms.timers_dlq_alarm.ok_actions", "alarm timers_dlq_alarm notifies"),
    ('  lifecycle {\n    prevent_destroy = true\n  }\n}\n\nresource "aws_s3_bucket_server_side_encryption',
     '}\n\nresource "aws_s3_bucket_server_side_encryption', "buckets.values.retained",
     "bucket values: must be encrypted at rest and retained"),
    ('prefix = "ephemeral/"', 'prefix = "actors/"', "buckets.values.lifecycle", "expires actors/"),
    ("restrict_public_buckets = true", "restrict_public_buckets = false", "buckets.values.public_access_block",
     "bucket values: public access"),
    ('resources = ["${aws_s3_bucket.values.arn}/*"]', 'resources = ["*"]', "iam.worker_role", "worker_role grants"),
    ("DORMANT_BUCKET           = aws_s3_bucket.values.bucket", "DORMANT_BUCKET           = aws_s3_bucket.values.arn",
     "functions.", "DORMANT_BUCKET = '{values.arn}', expected {values.name}"),
], ids=["table-key", "callback-route-authorized", "iam-action", "batch-size", "redrive",
        "queue-unencrypted-unretained", "route-open", "token-in-env", "throttling", "ssm-any-region",
        "reserved-concurrency", "alarm-actions", "bucket-unretained", "lifecycle-expires-actors", "bucket-public",
        "bucket-iam-wildcard", "bucket-env"])
def test_a_mismatched_terraform_copy_is_caught(old: str, new: str, where: str, code_rule: str,
                                               translated: dict[str, Any]) -> None:
    values = SCENARIOS["operations"] if "alarm" in code_rule else {}
    broken = _terraform_with(old, new, values)
    found = differences(describe_sam(translated, values), broken)
    assert found and all(line.startswith(where) for line in found), found
    assert any(code_rule in problem for problem in code_mismatches(broken, values)), code_mismatches(broken, values)


def _template_with(old: str, new: str) -> dict[str, Any]:
    text = TEMPLATE.read_text()
    assert old in text, f"the broken copy needs {old!r} in template.yaml"
    return translate(load_template(text.replace(old, new, 1)))


@pytest.mark.parametrize(("old", "new", "problem"), [
    ("VisibilityTimeout: 360", "VisibilityTimeout: 300",
     "queue wake visibility timeout 300 < 6 x the worker timeout 60"),
    ("DORMANT_QUEUE_URL: !Ref WakeQueue", "DORMANT_QUEUE_URL: !Ref WakeDeadLetterQueue",
     "DORMANT_QUEUE_URL = '{wake_dlq.url}', expected {wake.url}"),
    ("AttributeName: expires_at", "AttributeName: ttl", "table ttl"),
    ("Action: [sqs:SendMessage]", "Action: [sqs:*]", "worker_role grants"),
    ("DeduplicationScope: messageGroup", "DeduplicationScope: queue",
     "queue wake: DeduplicationScope='queue', but the code's queue_attributes says 'messageGroup'"),
    ("    UpdateReplacePolicy: Retain\n    Properties:\n      TableName:",
     "    UpdateReplacePolicy: Delete\n    Properties:\n      TableName:", "table: must be retained"),
    ('    Default: "true"\n    AllowedValues: ["true", "false"]\n    Description: >-\n      DynamoDB deletion',
     '    Default: "false"\n    AllowedValues: ["true", "false"]\n    Description: >-\n      DynamoDB deletion',
     "table deletion protection: a parameter, on by default"),
    ("AuthorizationType: !If [IamAuth, AWS_IAM, !If [JwtAuth, JWT, NONE]]",
     "AuthorizationType: !If [JwtAuth, JWT, NONE]", "auth mode iam"),
    ("      RouteKey: $default", "      RouteKey: GET /actors/{actor}/{key}/history", "routes ["),
    ("      RouteKey: POST /callbacks/{token}\n      Target: !Sub integrations/${ApiIntegration}\n"
     "      AuthorizationType: NONE",
     "      RouteKey: POST /callbacks/{token}\n      Target: !Sub integrations/${ApiIntegration}\n"
     "      AuthorizationType: AWS_IAM", "route POST /callbacks/{token}: an outside system holds only the token"),
    ("Dimensions: [{ Name: FunctionName, Value: !Ref WorkerFunction }]",
     "Dimensions: [{ Name: FunctionName, Value: !Ref ApiFunction }]", "alarm worker_errors_alarm watches"),
    ("DestinationArn: !GetAtt ApiAccessLogGroup.Arn", "DestinationArn: !GetAtt ApiLogGroup.Arn",
     "stage access log"),
    ("            Prefix: ephemeral/", "            Prefix: actors/", "lifecycle rule expire-ephemeral-values expires"),
    ('Bool: { "aws:SecureTransport": "false" }', 'Bool: { "aws:SecureTransport": "true" }', "expected TLS only"),
    ("DORMANT_BUCKET: !Ref ValueBucket", "DORMANT_BUCKET: !Ref ActorTable",
     "DORMANT_BUCKET = '{table.name}', expected {values.name}"),
    ("    UpdateReplacePolicy: Retain\n    Properties:\n      BucketName:",
     "    UpdateReplacePolicy: Delete\n    Properties:\n      BucketName:",
     "bucket values: must be encrypted at rest and retained"),
    ("          - ObjectOwnership: BucketOwnerEnforced", "          - ObjectOwnership: ObjectWriter",
     "expected all four blocks and ACLs disabled"),
], ids=["visibility", "env", "ttl", "iam-wildcard", "queue-attributes", "table-replaced", "protection-off",
        "route-open", "route-not-default", "callback-route-authorized", "alarm-function", "access-log",
        "lifecycle-expires-actors", "not-tls-only", "bucket-env", "bucket-replaced", "acls-on"])
def test_a_template_that_does_not_fit_the_code_is_caught(old: str, new: str, problem: str,
                                                         terraform_description: Description) -> None:
    broken = describe_sam(_template_with(old, new))
    assert any(problem in line for line in code_mismatches(broken)), code_mismatches(broken)
    assert differences(broken, terraform_description) != []


def test_the_reader_refuses_what_it_does_not_understand(translated: dict[str, Any]) -> None:
    """A construct the description does not know must fail the comparison, not vanish from it."""
    unknown = {**translated, "Resources": {**translated["Resources"], "Extra": {
        "Type": "AWS::SQS::Queue", "Properties": {"QueueName": "x"}}}}
    with pytest.raises(Unsupported, match="Extra"):
        describe_sam(unknown)
    texts = {path.name: path.read_text() for path in INFRA.glob("*.tf")}
    texts["main.tf"] += '\nresource "aws_sqs_queue" "extra" {\n  name = "x"\n}\n'
    with pytest.raises(Unsupported, match=r"aws_sqs_queue\.extra"):
        describe_terraform(INFRA, texts)
    # a resource of a type the description has no place for: refused, never left out of the comparison
    notified = {**translated, "Resources": {**translated["Resources"], "ValueEvents": {
        "Type": "AWS::SNS::Topic", "Properties": {}}}}
    with pytest.raises(Unsupported, match="ValueEvents"):
        describe_sam(notified)
    texts = {path.name: path.read_text() for path in INFRA.glob("*.tf")}
    texts["values.tf"] += '\nresource "aws_s3_bucket_notification" "values" {\n  bucket = aws_s3_bucket.values.id\n}\n'
    with pytest.raises(Unsupported, match=r"aws_s3_bucket_notification\.values"):
        describe_terraform(INFRA, texts)
    with pytest.raises(Unsupported, match="unknown"):
        describe_terraform(INFRA, values={"no_such_variable": 1})
