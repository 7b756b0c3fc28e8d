"""What the code requires of a deployment, checked against a description (tests/deploy/describe.py).

The sources of truth are the code's own definitions: the table of `aws_store.table_definition` and
`TTL_ATTRIBUTE`, the DynamoDB operations `DynamoEventStore` can call, the SQS calls `SqsTransport` makes, the S3
operations of large values and the bucket's lifecycle (`dormant.dev.bucket`, what `dormant dev` creates), the
`DORMANT_*` settings and their default queue names, the Lambda entry points in functions/, the layer's
platform in the Makefile, the auth modes `Settings.auth_mode` knows and the operator routes of the HTTP API.
Security rules hold in every scenario (tests/deploy/describe.py SCENARIOS): callers authenticated as the auth
mode says, the operator token never in an environment, data retained, queues encrypted, limits and alarms set.
"""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

from dormant.dev.bucket import lifecycle_rules
from dormant.dynamodb import requests as dynamo_requests
from dormant.dynamodb import store as aws_store
from dormant.ports import ActorRef
from dormant.runtime.clocks import OffsetClock
from dormant.settings import Settings
from dormant.sqs.transport import QueueUrls, SqsTransport, WakeMessage, queue_attributes

from .describe import Description

ROOT = Path(__file__).resolve().parents[2]

# env var -> the resource attribute it must name
ENVIRONMENT = {
    "DORMANT_TABLE": "{table.name}", "DORMANT_BUCKET": "{values.name}",
    "DORMANT_QUEUE_URL": "{wake.url}", "DORMANT_QUEUE_NAME": "{wake.name}",
    "DORMANT_TIMER_QUEUE_URL": "{timers.url}", "DORMANT_TIMER_QUEUE_NAME": "{timers.name}",
    "DORMANT_DLQ_URL": "{timers_dlq.url}", "DORMANT_DLQ_NAME": "{timers_dlq.name}",
    "DORMANT_FIFO_DLQ_URL": "{wake_dlq.url}", "DORMANT_FIFO_DLQ_NAME": "{wake_dlq.name}",
    "DORMANT_APP": "{param.app}", "DORMANT_MAX_RECEIVES": "{param.max_receives}",
    # callback URLs (cb.url): the HTTP API's own URL unless public_url names another (the scenarios leave it empty)
    "DORMANT_PUBLIC_URL": "https://{http_api.id}.execute-api.{AWS::Region}.{AWS::URLSuffix}",
    # where the worker posts committed events (dormant.aws.realtime): the WebSocket API's stage
    "DORMANT_REALTIME_URL": "https://{realtime_api.id}.execute-api.{AWS::Region}.{AWS::URLSuffix}/{param.stage}",
}
# The WebSocket API's connection management: the worker posts, the API function posts and deletes
CONNECTIONS = "{realtime_api.execution_arn}/{param.stage}/%s/@connections/*"
# what the API function alone is given: how callers authenticate, where the operator token is
API_ENVIRONMENT = {
    "DORMANT_AUTH_MODE": "{param.auth_mode}", "DORMANT_JWT_ISSUER": "{param.jwt_issuer}",
    "DORMANT_JWT_AUDIENCE": "{param.jwt_audience}",
    "DORMANT_INSPECTOR_TOKEN_PARAMETER": "{param.inspector_token_parameter}",
}
# the $connect authorizer of jwt mode (dormant.aws.authorizer): the token's issuer and audiences, no operator token
AUTHORIZER_ENVIRONMENT = {name: value for name, value in API_ENVIRONMENT.items()
                          if name != "DORMANT_INSPECTOR_TOKEN_PARAMETER"}
# auth mode -> the $default route's API Gateway authorization
AUTHORIZATION = {"iam": "AWS_IAM", "jwt": "JWT", "none": "NONE"}
# The routes of the HTTP API: $default, every path, the operator routes too, behind the auth mode's authorization (the
# app then checks the operator token on those; tests/deploy/test_parity.py checks both layers), and the callback
# routes, without authorization in every mode: their token is their authorization (the app checks it)
CALLBACK_ROUTES = {"POST /callbacks/{token}", "GET /callbacks/{token}", "POST /callbacks/{token}/webhook",
                   "GET /callbacks/{token}/approve", "POST /callbacks/{token}/approve"}
ROUTES = {"$default", *CALLBACK_ROUTES}
OPERATOR_TOKEN_ARN = ("arn:{AWS::Partition}:ssm:{AWS::Region}:{AWS::AccountId}:"
                      "parameter{param.inspector_token_parameter}")
# queue role -> the Settings field holding its default name ("dormant" + the suffix every deployment uses)
QUEUE_NAMES = {"wake": "queue_name", "timers": "timer_queue_name", "timers_dlq": "dlq_name",
               "wake_dlq": "fifo_dlq_name"}
# The S3 operations of large values (the issue 19 contract): PutObject, GetObject, DeleteObjects (s3:DeleteObject) on
# the objects, ListObjectsV2 (s3:ListBucket) on the bucket; both functions make all four.
VALUE_ACTIONS = {"s3:PutObject": {"{values.arn}/*"}, "s3:GetObject": {"{values.arn}/*"},
                 "s3:DeleteObject": {"{values.arn}/*"}, "s3:ListBucket": {"{values.arn}"}}
# What the bucket is, everywhere (dormant.dev.bucket creates it so for `dormant dev`)
PUBLIC_ACCESS_BLOCKED = {"block_public_acls": True, "block_public_policy": True, "ignore_public_acls": True,
                         "restrict_public_buckets": True}
TLS_ONLY = ("TlsOnly", "Deny", frozenset({"s3:*"}), frozenset({"{values.arn}", "{values.arn}/*"}), "*",
            frozenset({("Bool", "aws:SecureTransport", ("false",))}))
EVENT_SOURCE_ACTIONS = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
                        "sqs:ChangeMessageVisibility"}  # what Lambda's SQS event source needs (and no more)


def store_actions() -> set[str]:
    """The DynamoDB actions DynamoEventStore may call while running (table creation is for tests and dev): every
    request of the store goes through its Table (dormant.dynamodb.requests), whose OPERATIONS maps them."""
    source = Path(dynamo_requests.__file__).read_text()
    called = set(re.findall(r'_(?:call|conditional)\("(\w+)"', source))
    known = set(dynamo_requests.OPERATIONS)
    if not called or not called <= known:
        raise AssertionError(f"the store's Table calls {called - known}, which OPERATIONS does not map")
    for path in Path(dynamo_requests.__file__).parent.glob("*.py"):
        if path.name not in ("requests.py", "table.py") and re.search(r"\bclient\.\w+\(", path.read_text()):
            raise AssertionError(f"dormant/dynamodb/{path.name} calls its client itself, not through its Table")
    return {f"dynamodb:{operation}" for operation in known}


class _RecordingSqs:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        async def call(**kwargs: Any) -> dict[str, Any]:
            self.calls.append(name)
            return {}
        return call


def transport_actions() -> set[str]:
    """The SQS actions SqsTransport makes when waking an actor now, later, and when a timer hops."""
    sqs = _RecordingSqs()
    clock = OffsetClock(frozen_at=1000.0)
    transport = SqsTransport(sqs, QueueUrls(wake="https://q/1/wake.fifo", timers="https://q/1/timers"), clock)
    ref = ActorRef(name="a", key=("k",))

    async def use() -> None:
        await transport.wake(ref, reason="m1")
        await transport.wake(ref, at=5000.0)
        await transport.send_timer(WakeMessage.for_ref(ref, due=9000.0, hops=1))
    asyncio.run(use())
    return {"sqs:" + "".join(part.title() for part in call.split("_")) for call in sqs.calls}


def _flag(value: Any) -> str | None:
    return None if value is None else str(value).lower()


def _defines(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


def _makefile_variable(name: str) -> str:
    match = re.search(rf"^{name}\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M)
    if match is None:
        raise AssertionError(f"the Makefile does not set {name}")
    return match.group(1)


# adot_layer_arn set (docs/observability.md, "Traces on Lambda"): what it adds to each function, and nothing else
TRACING_ENVIRONMENT = {"AWS_LAMBDA_EXEC_WRAPPER": "/opt/otel-instrument"}  # the ADOT layer's wrapper
XRAY_POLICY = "arn:{AWS::Partition}:iam::aws:policy/AWSXRayDaemonWriteAccess"  # X-Ray's writes: no resource-level


def code_mismatches(d: Description, values: dict[str, Any] | None = None) -> list[str]:
    """Everything in the description (of the scenario `values`) that does not fit the code."""
    problems: list[str] = []
    settings = Settings(_env_file=None)
    scenario = {**d["parameters"], **(values or {})}
    traced = bool(scenario.get("adot_layer_arn"))

    # -- the table: exactly what the store creates in tests and `dormant dev`
    definition = aws_store.table_definition("t")
    expected_table = {
        "billing_mode": definition["BillingMode"],
        "attributes": {a["AttributeName"]: a["AttributeType"] for a in definition["AttributeDefinitions"]},
        "keys": {k["AttributeName"]: k["KeyType"] for k in definition["KeySchema"]},
        "local_indexes": {i["IndexName"]: {"keys": {k["AttributeName"]: k["KeyType"] for k in i["KeySchema"]},
                                           "projection": i["Projection"]["ProjectionType"]}
                          for i in definition.get("LocalSecondaryIndexes", [])},
        "global_indexes": {i["IndexName"]: {"keys": {k["AttributeName"]: k["KeyType"] for k in i["KeySchema"]},
                                            "projection": i["Projection"]["ProjectionType"]}
                           for i in definition.get("GlobalSecondaryIndexes", [])},
        "ttl": {"attribute": aws_store.TTL_ATTRIBUTE, "enabled": True},
    }
    table = d["tables"].get("table", {})
    for key, value in expected_table.items():
        if table.get(key) != value:
            problems.append(f"table {key}: {table.get(key)!r}, the code's table_definition/TTL has {value!r}")

    # -- the environment of both functions
    functions = d["functions"]
    jwt = scenario.get("auth_mode") == "jwt"
    if set(functions) != {"worker", "api", *(["authorizer"] if jwt else [])}:
        problems.append(f"functions: {sorted(functions)}, expected worker and api (and the authorizer in jwt mode)")
    for role, function in functions.items():
        env = function["environment"]
        authenticates = {**API_ENVIRONMENT} if role == "api" else AUTHORIZER_ENVIRONMENT if role == "authorizer" \
            else {}
        for name, target in {**ENVIRONMENT, **authenticates}.items():
            if env.get(name) != target:
                problems.append(f"{role} {name} = {env.get(name)!r}, expected {target}")
        for name in env:
            if traced and TRACING_ENVIRONMENT.get(name) == env[name]:
                continue
            field = name.removeprefix("DORMANT_").lower()
            if not name.startswith("DORMANT_") or field not in Settings.model_fields:
                problems.append(f"{role} sets {name}, which dormant.settings.Settings does not read")
            if name in API_ENVIRONMENT and name not in authenticates:
                problems.append(f"{role} sets {name}: only the API (and the $connect authorizer) authenticate "
                                "callers")
        if "DORMANT_INSPECTOR_TOKEN" in env:
            problems.append(f"{role}: DORMANT_INSPECTOR_TOKEN puts the operator token in the environment (and "
                            "the stack's state): the API reads it from SSM at run time")
        reserved = function.get("reserved_concurrency")
        if role == "authorizer":  # capped by the WebSocket stage's throttling, not a reservation
            if reserved != -1:
                problems.append(f"authorizer reserved concurrency {reserved!r}: expected none")
        elif reserved != -1 and reserved != "{param." + role + "_reserved_concurrency}":
            problems.append(f"{role} reserved concurrency {reserved!r}: expected the {role}_reserved_concurrency "
                            "parameter (or none with -1)")
        module, _, attribute = function["handler"].rpartition(".")
        path = ROOT / (module.replace(".", "/") + ".py")
        if not path.exists() or not _defines(path, attribute):
            problems.append(f"{role} handler {function['handler']}: {path} does not define {attribute}")

    # API Gateway cuts a request at 30 s; the API holds waits for at most api_max_wait, then answers
    api_timeout = functions.get("api", {}).get("timeout", 0)
    if not settings.api_max_wait < api_timeout <= 30:
        problems.append(f"api timeout {api_timeout}: must exceed DORMANT_API_MAX_WAIT ({settings.api_max_wait} s) "
                        "and be at most API Gateway's 30 s")

    # -- the data: retained with the stack, PITR, deletion protection by default; names from the data prefix
    data_prefix = "{param.data_name_prefix}" if scenario.get("data_name_prefix") else "{prefix}"
    if table.get("name") != data_prefix + "-actors":
        problems.append(f"table named {table.get('name')!r}, expected {data_prefix}-actors")
    if not table.get("retained") or not table.get("point_in_time_recovery"):
        problems.append("table: must be retained when the stack goes or replaces it, with point-in-time recovery")
    if table.get("deletion_protection") != "{param.table_deletion_protection}" \
            or d["parameters"].get("table_deletion_protection") is not True:
        problems.append("table deletion protection: a parameter, on by default")

    # -- queues: names, FIFO-ness, redrive, encryption, retained
    queues = d["queues"]
    for role, field in QUEUE_NAMES.items():
        queue = queues.get(role)
        default = getattr(settings, field)
        if queue is None:
            problems.append(f"queue {role} is missing")
            continue
        if queue["name"] != data_prefix + default.removeprefix("dormant"):
            problems.append(f"queue {role} is named {queue['name']!r}; the code's default {field} is {default!r}")
        if queue["encryption"] is None or not queue["retained"]:
            problems.append(f"queue {role}: must be encrypted at rest and retained with the stack")
        if queue["fifo"] != default.endswith(".fifo"):
            problems.append(f"queue {role}: FifoQueue={queue['fifo']} but its name {default!r} says otherwise")
        # The attributes `dormant dev` and the tests create the queues with (all but the visibility timeout).
        code = queue_attributes(role)
        declared = {"FifoQueue": "true" if queue["fifo"] else None,
                    "ContentBasedDeduplication": _flag(queue["content_based_deduplication"]),
                    "DeduplicationScope": queue["deduplication_scope"],
                    "FifoThroughputLimit": queue["throughput_limit"],
                    "MessageRetentionPeriod": str(queue["retention"])}
        for attribute, value in declared.items():
            if code.get(attribute) != value:
                problems.append(f"queue {role}: {attribute}={value!r}, but the code's queue_attributes says "
                                f"{code.get(attribute)!r}")
    for source, dlq in (("wake", "wake_dlq"), ("timers", "timers_dlq")):
        redrive = queues.get(source, {}).get("redrive")
        if redrive != {"target": "{" + dlq + ".arn}", "max_receives": "{param.max_receives}"}:
            problems.append(f"queue {source} redrive {redrive!r}, expected to {dlq} after MaxReceives")
    if d["parameters"].get("max_receives") != settings.max_receives:
        problems.append(f"max_receives default {d['parameters'].get('max_receives')} != Settings "
                        f"{settings.max_receives}")

    # -- event sources: both queues, partial failures, visibility >= 6 x timeout (+ window)
    worker_timeout = functions.get("worker", {}).get("timeout", 0)
    sources = {target: settings_ for (function, target), settings_ in d["event_sources"].items()
               if function == "{worker_alias.arn}"}  # the alias `live`: a published version (SnapStart)
    if set(sources) != {"{wake.arn}", "{timers.arn}"} or len(d["event_sources"]) != 2:
        problems.append(f"event sources {sorted(map(str, d['event_sources']))}: expected the worker on wake and "
                        "timers only")
    for target, source in sources.items():
        role = target.strip("{}").split(".")[0]
        queue = queues.get(role, {})
        window = source["batching_window"] or 0
        if queue.get("visibility_timeout", 0) < 6 * worker_timeout + window:
            problems.append(f"queue {role} visibility timeout {queue.get('visibility_timeout')} < 6 x the worker "
                            f"timeout {worker_timeout} + batching window {window}")
        if source["response_types"] != ["ReportBatchItemFailures"]:
            problems.append(f"event source {role}: {source['response_types']}, expected ReportBatchItemFailures")
        if queue.get("fifo") and (source["batching_window"] is not None or (source["batch_size"] or 10) > 10):
            problems.append(f"event source {role}: a FIFO queue takes no batching window and at most 10 messages")
        if not source["enabled"]:
            problems.append(f"event source {role} is disabled")
        if source["max_concurrency"] != "{param.worker_max_concurrency}":
            problems.append(f"event source {role}: maximum concurrency {source['max_concurrency']!r}, expected "
                            "the worker_max_concurrency parameter")
    # Both event sources at their maximum stay within the worker's reservation: batches are never throttled.
    parameters = d["parameters"]
    if not 2 * parameters.get("worker_max_concurrency", 0) <= parameters.get("worker_reserved_concurrency", 0):
        problems.append("defaults: 2 x worker_max_concurrency must fit in worker_reserved_concurrency")

    # -- IAM: what the code calls, on these resources only
    store = store_actions()
    send = transport_actions()
    table_resources = {"{table.arn}", "{table.arn}/index/*"}
    source_queues = {"{wake.arn}", "{timers.arn}"}
    for role, needs_event_source in (("worker_role", True), ("api_role", False)):
        policy = d["iam"].get(role)
        if policy is None:
            problems.append(f"role {role} is missing")
            continue
        grants: dict[str, set[str]] = {}
        for _sid, effect, actions, resources in policy["statements"]:
            if effect != "Allow":
                problems.append(f"{role}: unexpected {effect} statement")
            for action in actions:
                grants.setdefault(action, set()).update(resources)
        expected = {action: table_resources for action in store}
        expected.update(VALUE_ACTIONS)
        expected.update({action: source_queues for action in send})
        if needs_event_source:
            expected.update({action: source_queues for action in EVENT_SOURCE_ACTIONS})
            # the worker moves poison wake-ups to the DLQs itself (dormant.aws.redelivery)
            expected.update({action: source_queues | {"{wake_dlq.arn}", "{timers_dlq.arn}"} for action in send})
            expected["execute-api:ManageConnections"] = {CONNECTIONS % "POST"}
        else:  # the API reads the operator token from its one parameter
            expected["ssm:GetParameter"] = {OPERATOR_TOKEN_ARN}
            expected["execute-api:ManageConnections"] = {CONNECTIONS % "POST", CONNECTIONS % "DELETE"}
        logs = "{" + role.replace("_role", "_logs") + ".arn}:*"
        expected.update({"logs:CreateLogStream": {logs}, "logs:PutLogEvents": {logs}})
        if grants != expected:
            extra = {a: sorted(r) for a, r in grants.items() if expected.get(a) != r}
            missing = {a: sorted(r) for a, r in expected.items() if grants.get(a) != r}
            problems.append(f"{role} grants {extra} where the code needs {missing}")
        if policy["managed_policies"] != ([XRAY_POLICY] if traced else []):
            problems.append(f"{role} attaches managed policies {policy['managed_policies']} (too broad)")
        if policy["assumed_by"] != ["lambda.amazonaws.com"]:
            problems.append(f"{role} is assumed by {policy['assumed_by']}")

    # the $connect authorizer (jwt mode) reads nothing of the stack: its logs only
    authorizer_role = d["iam"].get("authorizer_role")
    if jwt != (authorizer_role is not None):
        problems.append(f"authorizer role {'missing' if jwt else 'present'} in auth mode {scenario.get('auth_mode')}")
    if authorizer_role is not None:
        logs = "{authorizer_logs.arn}:*"
        grants = {(action, resource) for _sid, effect, actions, resources in authorizer_role["statements"]
                  for action in actions for resource in resources if effect == "Allow"}
        if grants != {("logs:CreateLogStream", logs), ("logs:PutLogEvents", logs)}:
            problems.append(f"authorizer_role grants {sorted(grants)}: its own logs only")
        if authorizer_role["managed_policies"] != ([XRAY_POLICY] if traced else []):
            problems.append(f"authorizer_role attaches {authorizer_role['managed_policies']} (too broad)")

    # -- runtime and the layer the Makefile builds
    python = _makefile_variable("LAMBDA_PYTHON")
    platform = _makefile_variable("LAMBDA_PLATFORM")
    arch = {"manylinux2014_aarch64": "arm64", "manylinux2014_x86_64": "x86_64"}.get(platform)
    for role, function in functions.items():
        if function["runtime"] != f"python{python}":
            problems.append(f"{role} runtime {function['runtime']}; the Makefile builds the layer for {python}")
        if function["architectures"] != [arch]:
            problems.append(f"{role} architectures {function['architectures']}; the layer is built for {platform}")
        if function["layers"] != ["{layer.arn}", *(["{param.adot_layer_arn}"] if traced else [])]:
            problems.append(f"{role} layers {function['layers']}")
    layer = d["layers"].get("layer", {})
    if layer.get("runtimes") != [f"python{python}"] or layer.get("architectures") != [arch]:
        problems.append(f"layer {layer}: expected python{python} on {arch}")

    problems += _bucket_mismatches(d, scenario)
    problems += _http_mismatches(d, scenario)
    problems += _alarm_mismatches(d, scenario)
    for role, group in d["log_groups"].items():
        if group["retention"] != "{param.log_retention_days}":
            problems.append(f"log group {role} keeps logs {group['retention']!r}, expected log_retention_days")
    return problems


def _code_lifecycle() -> list[dict[str, Any]]:
    """dormant.dev.bucket.lifecycle_rules in the description's shape."""
    return sorted(({"id": rule["ID"], "status": rule["Status"], "prefix": rule.get("Filter", {}).get("Prefix", ""),
                    "expiration_days": rule.get("Expiration", {}).get("Days"),
                    "abort_incomplete_upload_days": rule.get("AbortIncompleteMultipartUpload", {}).get(
                        "DaysAfterInitiation")} for rule in lifecycle_rules()), key=str)


def _bucket_mismatches(d: Description, scenario: dict[str, Any]) -> list[str]:
    """One bucket of large values: named by the parameter or left to the tool (names are global), encrypted, private,
    TLS only, retained, with the code's lifecycle, and no rule that expires what the log references (actors/)."""
    problems = []
    if set(d["buckets"]) != {"values"}:
        return [f"buckets {sorted(d['buckets'])}: expected the bucket of large values"]
    bucket = d["buckets"]["values"]
    name = "{param.value_bucket_name}" if scenario.get("value_bucket_name") else "{generated}"
    if bucket["name"] != name:
        problems.append(f"bucket values named {bucket['name']!r}, expected {name}")
    if bucket["encryption"] is None or not bucket["retained"]:
        problems.append("bucket values: must be encrypted at rest and retained with the stack")
    if bucket["public_access_block"] != PUBLIC_ACCESS_BLOCKED or bucket["ownership"] != ["BucketOwnerEnforced"]:
        problems.append(f"bucket values: public access {bucket['public_access_block']}, ownership "
                        f"{bucket['ownership']}: expected all four blocks and ACLs disabled")
    if TLS_ONLY not in bucket["policy"] or any(s[1] == "Allow" for s in bucket["policy"]):
        problems.append(f"bucket values policy {bucket['policy']}: expected TLS only (and no grant)")
    if bucket["lifecycle"] != _code_lifecycle():
        problems.append(f"bucket values lifecycle {bucket['lifecycle']}, the code's lifecycle_rules is "
                        f"{_code_lifecycle()}")
    for rule in bucket["lifecycle"]:
        if rule["expiration_days"] is not None and "actors/".startswith(rule["prefix"]):
            problems.append(f"bucket values lifecycle rule {rule['id']} expires actors/: the log references those")
    return problems


def _http_mismatches(d: Description, scenario: dict[str, Any]) -> list[str]:
    """Every route to the API function on the $default stage (the app sees unprefixed paths); the actor routes
    authenticated as the auth mode says, none left open to the app; throttled, access-logged."""
    problems = []
    http = d["http"]
    routes = http["routes"]
    mode = scenario.get("auth_mode")
    if set(routes) != ROUTES:
        problems.append(f"routes {sorted(routes)}: expected $default (every path behind the auth mode, the "
                        "operator routes too: docs/http-api.md, Auth) and the callback routes")
    for key in CALLBACK_ROUTES & set(routes):
        if (routes[key]["authorization"], routes[key].get("authorizer")) != ("NONE", None):
            problems.append(f"route {key}: an outside system holds only the token: no authorization, no authorizer")
    for key, route in routes.items():
        if (route["target"], route["payload"], route["integration"]) != ("api_alias", "2.0", "AWS_PROXY"):
            problems.append(f"route {key}: expected the API function's alias through AWS_PROXY, payload 2.0")
    default = routes.get("$default", {})
    if mode not in AUTHORIZATION or default.get("authorization") != AUTHORIZATION[mode]:
        problems.append(f"auth mode {mode}: the $default route's authorization is {default.get('authorization')!r}")
    authorizers = http["authorizers"]
    if mode == "jwt":
        expected = {"jwt_authorizer": {"type": "JWT", "identity_sources": ["$request.header.Authorization"],
                                       "issuer": "{param.jwt_issuer}",
                                       "audience": "split(',', {param.jwt_audience})", "function": None}}
        if authorizers != expected or default.get("authorizer") != "{jwt_authorizer.id}":
            problems.append(f"jwt mode: authorizers {authorizers}, $default uses {default.get('authorizer')!r}")
    elif authorizers or default.get("authorizer") is not None:
        problems.append(f"auth mode {mode} has authorizers {sorted(authorizers)}")
    stage = http["stage"] or {}
    if (stage.get("name"), stage.get("auto_deploy")) != ("$default", True):
        problems.append(f"stage {stage}: expected the auto-deployed $default stage")
    if stage.get("throttling") != {"rate": "{param.throttling_rate_limit}", "burst": "{param.throttling_burst_limit}"}:
        problems.append(f"stage throttling {stage.get('throttling')}: expected the throttling parameters")
    logs = stage.get("access_log") or {}
    if logs.get("destination") != "{api_access_logs.arn}" or not {"requestId", "status", "principal", "subject"} \
            <= set(logs.get("format", {})):
        problems.append(f"stage access log {logs}: to the access log group, with the request, status and caller")
    expected_permission = sorted([("{api_alias.arn}", "apigateway.amazonaws.com", "lambda:InvokeFunction",
                                   "{http_api.execution_arn}/*"),
                                  ("{api_alias.arn}", "apigateway.amazonaws.com", "lambda:InvokeFunction",
                                   "{realtime_api.execution_arn}/*"),
                                  *([("{authorizer_alias.arn}", "apigateway.amazonaws.com", "lambda:InvokeFunction",
                                      "{realtime_api.execution_arn}/authorizers/{realtime_authorizer.id}")]
                                    if mode == "jwt" else [])])
    if d["permissions"] != expected_permission:
        problems.append(f"permissions {d['permissions']}: expected only the two APIs to invoke the API function's "
                        "alias (and the WebSocket API's authorizer, only, the authorizer's in jwt mode)")
    return problems + _websocket_mismatches(d, scenario)


def _websocket_mismatches(d: Description, scenario: dict[str, Any]) -> list[str]:
    """The WebSocket API (docs/realtime.md): its three routes to the API function's alias, $connect authorized
    with IAM in iam mode (the only route API Gateway can authorize), throttled like the HTTP API, access-logged."""
    problems = []
    websocket = d["websocket"]
    routes = websocket["routes"]
    if set(routes) != {"$connect", "$disconnect", "$default"}:
        problems.append(f"websocket routes {sorted(routes)}: expected $connect, $disconnect, $default")
    for key, route in routes.items():
        if (route["target"], route["integration"]) != ("api_alias", "AWS_PROXY"):
            problems.append(f"websocket route {key}: expected the API function's alias through AWS_PROXY")
        mode = scenario.get("auth_mode", "iam")
        authorization, authorizer = "NONE", None
        if key == "$connect" and mode == "iam":
            authorization = "AWS_IAM"
        elif key == "$connect" and mode == "jwt":  # the Lambda authorizer (dormant.aws.authorizer)
            authorization, authorizer = "CUSTOM", "{realtime_authorizer.id}"
        if (route["authorization"], route["authorizer"]) != (authorization, authorizer):
            problems.append(f"websocket route {key}: authorization {route['authorization']!r} "
                            f"({route['authorizer']!r}), expected {authorization!r} ({authorizer!r})")
    expected = {"realtime_authorizer": {"type": "REQUEST", "identity_sources": None, "issuer": None,
                                        "audience": None, "function": "authorizer_alias"}}
    if websocket["authorizers"] != (expected if scenario.get("auth_mode") == "jwt" else {}):
        problems.append(f"websocket authorizers {websocket['authorizers']}: the $connect authorizer in jwt mode "
                        "only")
    stage = websocket["stage"] or {}
    if (stage.get("name"), stage.get("auto_deploy")) != ("{param.stage}", True):
        problems.append(f"websocket stage {stage}: expected the auto-deployed stage named as the deployment's")
    if stage.get("throttling") != {"rate": "{param.throttling_rate_limit}", "burst": "{param.throttling_burst_limit}"}:
        problems.append(f"websocket stage throttling {stage.get('throttling')}: expected the throttling parameters")
    logs = stage.get("access_log") or {}
    if logs.get("destination") != "{api_access_logs.arn}" or not {"requestId", "status", "principal",
                                                                  "connection"} <= set(logs.get("format", {})):
        problems.append(f"websocket stage access log {logs}: to the access log group, with the connection")
    return problems


def _alarm_mismatches(d: Description, scenario: dict[str, Any]) -> list[str]:
    """An alarm on each dead-letter queue's depth and on the worker's errors, notifying the topic if any."""
    problems = []
    actions = ["{param.alarm_topic_arn}"] if scenario.get("alarm_topic_arn") else []
    expected = {
        "wake_dlq_alarm": (("AWS/SQS", "ApproximateNumberOfMessagesVisible"), {"QueueName": "{wake_dlq.name}"}),
        "timers_dlq_alarm": (("AWS/SQS", "ApproximateNumberOfMessagesVisible"), {"QueueName": "{timers_dlq.name}"}),
        "worker_errors_alarm": (("AWS/Lambda", "Errors"), {"FunctionName": "{worker.name}"}),
    }
    if set(d["alarms"]) != set(expected):
        problems.append(f"alarms {sorted(d['alarms'])}, expected {sorted(expected)}")
    for role, (metric, dimensions) in expected.items():
        alarm = d["alarms"].get(role)
        if alarm is None:
            continue
        if (alarm["metric"], alarm["dimensions"]) != (metric, dimensions):
            problems.append(f"alarm {role} watches {alarm['metric']} {alarm['dimensions']}")
        if (alarm["threshold"], alarm["comparison"], alarm["missing_data"]) != (0.0, "GreaterThanThreshold",
                                                                                  "notBreaching"):
            problems.append(f"alarm {role}: must fire on the first message or error")
        if alarm["actions"] != actions or alarm["ok_actions"] != actions:
            problems.append(f"alarm {role} notifies {alarm['actions']}, expected {actions}")
    return problems

