"""What a deployment created, read back through the AWS APIs (of a moto server), in the shape of a description
(tests/deploy/describe.py), and a description's tokens resolved into the values of that deployment, so the two
compare: the resources exist as the files describe them, and so as the code needs them (code_rules.py).

moto leaves out a few things AWS returns; those fields are not compared (noted where read): a function's
LoggingConfig, and the listing of a stage's authorizers (each authorizer is read by its id instead).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.deploy.describe import lifecycle_rule, policy_statement
from tests.deploy.roles import TF_ROLES

_ATTRIBUTES = {"arn": "arn", "url": "url", "name": "name", "function_name": "name", "bucket": "name", "id": "id",
               "invoke_arn": "invoke_arn", "execution_arn": "execution_arn"}


def tokens_of(state: dict[str, dict[str, Any]], *, prefix: str, values: dict[str, Any], region: str,
              account: str) -> dict[str, Any]:
    """token -> value, from Terraform's state (resource attributes) and the applied variable values."""
    tokens: dict[str, Any] = {"{prefix}": prefix, "{AWS::Region}": region, "{AWS::Partition}": "aws",
                              "{AWS::URLSuffix}": "amazonaws.com",
                              "{AWS::AccountId}": account}
    for address, attributes in state.items():
        role = TF_ROLES.get(address)
        if role is None:
            continue
        for attribute, token in _ATTRIBUTES.items():
            if attributes.get(attribute) not in (None, ""):
                tokens.setdefault("{" + role + "." + token + "}", attributes[attribute])
    tokens.update({"{param." + name + "}": value for name, value in values.items()})
    return tokens


def resolve(value: Any, tokens: dict[str, Any]) -> Any:
    """A description (or part of one) with every token replaced by its value; a whole token keeps its type."""
    if isinstance(value, dict):
        return {resolve(k, tokens): resolve(v, tokens) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(resolve(v, tokens) for v in value)
    if isinstance(value, (set, frozenset)):
        return type(value)(resolve(v, tokens) for v in value)
    if isinstance(value, str):
        if value in tokens:
            return tokens[value]
        return re.sub(r"\{[\w:.]+\}", lambda m: str(tokens.get(m.group(0), m.group(0))), value)
    return value


def _clients(session: Any) -> dict[str, Any]:
    return {name: session(name) for name in ("dynamodb", "s3", "sqs", "lambda", "iam", "apigatewayv2", "cloudwatch",
                                             "logs")}


def describe_live(client: Any, names: dict[str, Any], api_id: str,
                  realtime: tuple[str, str] | None = None) -> dict[str, Any]:
    """The deployment as the AWS APIs show it. `names`: role -> physical name (table, queues, functions, roles,
    log groups); `client(service)` -> a boto3 client; `realtime`: the WebSocket API's id and stage name."""
    c = _clients(client)
    live: dict[str, Any] = {"tables": {}, "buckets": {}, "queues": {}, "functions": {}, "event_sources": {},
                            "log_groups": {}, "iam": {}, "http": {"routes": {}, "authorizers": {}, "stage": None},
                            "alarms": {}, "permissions": []}
    if realtime is not None:
        live["websocket"] = {"routes": {}, "authorizers": {}, "stage": None}
    table = c["dynamodb"].describe_table(TableName=names["table"])["Table"]
    ttl = c["dynamodb"].describe_time_to_live(TableName=names["table"])["TimeToLiveDescription"]
    backups = c["dynamodb"].describe_continuous_backups(TableName=names["table"])["ContinuousBackupsDescription"]
    live["tables"]["table"] = {
        "name": table["TableName"], "billing_mode": table["BillingModeSummary"]["BillingMode"],
        "attributes": {a["AttributeName"]: a["AttributeType"] for a in table["AttributeDefinitions"]},
        "keys": {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]},
        "local_indexes": {i["IndexName"]: {"keys": {k["AttributeName"]: k["KeyType"] for k in i["KeySchema"]},
                                           "projection": i["Projection"]["ProjectionType"]}
                          for i in table.get("LocalSecondaryIndexes", [])},
        "global_indexes": {i["IndexName"]: {"keys": {k["AttributeName"]: k["KeyType"] for k in i["KeySchema"]},
                                            "projection": i["Projection"]["ProjectionType"]}
                           for i in table.get("GlobalSecondaryIndexes", [])},
        "ttl": {"attribute": ttl.get("AttributeName"), "enabled": ttl["TimeToLiveStatus"] == "ENABLED"},
        "point_in_time_recovery": backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED",
        "deletion_protection": table.get("DeletionProtectionEnabled", False),
    }
    live["buckets"]["values"] = _describe_live_bucket(c["s3"], names["values"])
    for role in ("wake", "timers", "wake_dlq", "timers_dlq"):
        url = c["sqs"].get_queue_url(QueueName=names[role])["QueueUrl"]
        a = c["sqs"].get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(a["RedrivePolicy"]) if "RedrivePolicy" in a else None
        live["queues"][role] = {
            "name": names[role], "fifo": a.get("FifoQueue") == "true",
            "content_based_deduplication": _flag(a.get("ContentBasedDeduplication")),
            "deduplication_scope": a.get("DeduplicationScope"), "throughput_limit": a.get("FifoThroughputLimit"),
            "visibility_timeout": int(a["VisibilityTimeout"]), "retention": int(a["MessageRetentionPeriod"]),
            "redrive": None if redrive is None else {"target": redrive["deadLetterTargetArn"],
                                                     "max_receives": int(redrive["maxReceiveCount"])},
            "encryption": "kms" if a.get("KmsMasterKeyId") else (
                "sse-sqs" if a.get("SqsManagedSseEnabled") == "true" else None)}
    jwt = "authorizer" in names  # auth_mode = jwt: the WebSocket API's $connect authorizer and its role and logs
    for role in ("worker", "api", *(["authorizer"] if jwt else [])):
        f = c["lambda"].get_function_configuration(FunctionName=names[role])
        concurrency = c["lambda"].get_function_concurrency(FunctionName=names[role])
        live["functions"][role] = {
            "name": f["FunctionName"], "handler": f["Handler"], "runtime": f["Runtime"],
            "architectures": f["Architectures"], "memory": f["MemorySize"], "timeout": f["Timeout"],
            "role": f["Role"], "environment": f["Environment"]["Variables"],
            "layers": [layer["Arn"] for layer in f.get("Layers", [])],
            "reserved_concurrency": concurrency.get("ReservedConcurrentExecutions", -1)}  # LoggingConfig: not in moto
        # The event sources invoke the alias `live` (a published version: what SnapStart snapshots).
        alias = c["lambda"].get_alias(FunctionName=names[role], Name="live")["AliasArn"]
        for m in c["lambda"].list_event_source_mappings(FunctionName=alias)["EventSourceMappings"]:
            live["event_sources"][(alias, m["EventSourceArn"])] = {
                "batch_size": m["BatchSize"], "batching_window": m.get("MaximumBatchingWindowInSeconds") or None,
                "response_types": sorted(m.get("FunctionResponseTypes", [])), "enabled": m["State"] == "Enabled",
                "max_concurrency": m.get("ScalingConfig", {}).get("MaximumConcurrency")}
    for role in ("worker_logs", "api_logs", "api_access_logs", *(["authorizer_logs"] if jwt else [])):
        group = c["logs"].describe_log_groups(logGroupNamePrefix=names[role])["logGroups"][0]
        live["log_groups"][role] = {"name": group["logGroupName"], "retention": group.get("retentionInDays")}
    for role in ("worker_role", "api_role", *(["authorizer_role"] if jwt else [])):
        iam = c["iam"]
        assumed = iam.get_role(RoleName=names[role])["Role"]["AssumeRolePolicyDocument"]
        statements = set()
        for policy in iam.list_role_policies(RoleName=names[role])["PolicyNames"]:
            document = iam.get_role_policy(RoleName=names[role], PolicyName=policy)["PolicyDocument"]
            for s in _document(document)["Statement"]:
                statements.add((s.get("Sid"), s["Effect"], frozenset(_list(s["Action"])),
                                frozenset(_list(s["Resource"]))))
        live["iam"][role] = {
            "assumed_by": sorted(_list(s["Principal"]["Service"])[0] for s in _document(assumed)["Statement"]),
            "statements": statements,
            "managed_policies": sorted(p["PolicyArn"] for p in iam.list_attached_role_policies(
                RoleName=names[role])["AttachedPolicies"])}
    _describe_live_http(c["apigatewayv2"], api_id, names, live)
    if realtime is not None:
        _describe_live_http(c["apigatewayv2"], realtime[0], names, live, section="websocket", stage_name=realtime[1])
    for alarm in c["cloudwatch"].describe_alarms()["MetricAlarms"]:
        alarm_role = names.get("alarm:" + alarm["AlarmName"])
        if alarm_role is None:
            continue
        live["alarms"][alarm_role] = {
            "name": alarm["AlarmName"], "metric": (alarm["Namespace"], alarm["MetricName"]),
            "dimensions": {d["Name"]: d["Value"] for d in alarm["Dimensions"]}, "statistic": alarm["Statistic"],
            "period": alarm["Period"], "evaluation_periods": alarm["EvaluationPeriods"],
            "threshold": float(alarm["Threshold"]), "comparison": alarm["ComparisonOperator"],
            "missing_data": alarm.get("TreatMissingData"), "actions": alarm.get("AlarmActions", []),
            "ok_actions": alarm.get("OKActions", [])}
    permissions = []
    for role in ("api", *(["authorizer"] if jwt else [])):
        alias = c["lambda"].get_alias(FunctionName=names[role], Name="live")["AliasArn"]
        policy = json.loads(c["lambda"].get_policy(FunctionName=names[role], Qualifier="live")["Policy"])
        permissions += [(alias, s["Principal"]["Service"], s["Action"], s.get("Condition", {}).get(
            "ArnLike", {}).get("AWS:SourceArn")) for s in policy["Statement"]]
    live["permissions"] = sorted(permissions)
    return live


def _describe_live_bucket(s3: Any, name: str) -> dict[str, Any]:
    """The bucket as S3 shows it (whether it is retained is the state's business: not compared here)."""
    default = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"][0][
        "ApplyServerSideEncryptionByDefault"]
    block = s3.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"]
    policy = json.loads(s3.get_bucket_policy(Bucket=name)["Policy"])
    return {
        "name": name,
        "encryption": "kms" if default.get("KMSMasterKeyID") or default["SSEAlgorithm"] != "AES256" else "AES256",
        "public_access_block": {"block_public_acls": block["BlockPublicAcls"],
                                "block_public_policy": block["BlockPublicPolicy"],
                                "ignore_public_acls": block["IgnorePublicAcls"],
                                "restrict_public_buckets": block["RestrictPublicBuckets"]},
        "ownership": [r["ObjectOwnership"] for r in s3.get_bucket_ownership_controls(Bucket=name)[
            "OwnershipControls"]["Rules"]],
        "versioning": s3.get_bucket_versioning(Bucket=name).get("Status"),
        "lifecycle": sorted((lifecycle_rule(r["ID"], r["Status"], r.get("Filter", {}).get("Prefix"),
                                            r.get("Expiration", {}).get("Days"),
                                            r.get("AbortIncompleteMultipartUpload", {}).get("DaysAfterInitiation"))
                             for r in s3.get_bucket_lifecycle_configuration(Bucket=name)["Rules"]), key=str),
        "policy": {policy_statement(s) for s in policy["Statement"]},
    }


def _describe_live_http(api: Any, api_id: str, names: dict[str, Any], live: dict[str, Any], *,
                        section: str = "http", stage_name: str = "$default") -> None:
    integrations = {i["IntegrationId"]: i for i in api.get_integrations(ApiId=api_id)["Items"]}
    for route in api.get_routes(ApiId=api_id)["Items"]:
        integration = integrations[route["Target"].removeprefix("integrations/")]
        uri = integration["IntegrationUri"]
        function = "api_alias" if uri.endswith((f":function:{names['api']}:live/invocations",
                                                f":function:{names['api']}:live")) else uri
        live[section]["routes"][route["RouteKey"]] = {
            "target": function, "payload": integration.get("PayloadFormatVersion"),
            "integration": integration["IntegrationType"], "authorization": route.get("AuthorizationType", "NONE"),
            "authorizer": route.get("AuthorizerId")}
        if route.get("AuthorizerId"):  # moto cannot list authorizers; it reads them one by one
            found = api.get_authorizer(ApiId=api_id, AuthorizerId=route["AuthorizerId"])
            if found["AuthorizerType"] == "JWT":
                live[section]["authorizers"]["jwt_authorizer"] = {
                    "type": found["AuthorizerType"], "identity_sources": found["IdentitySource"],
                    "issuer": found["JwtConfiguration"]["Issuer"], "audience": found["JwtConfiguration"]["Audience"]}
            else:  # the WebSocket API's $connect Lambda authorizer (jwt mode)
                uri = found.get("AuthorizerUri", "")
                live[section]["authorizers"]["realtime_authorizer"] = {
                    "type": found["AuthorizerType"], "identity_sources": found.get("IdentitySource") or None,
                    "function": "authorizer_alias" if uri.endswith(
                        f":function:{names.get('authorizer')}:live/invocations") else uri}
    stage = api.get_stage(ApiId=api_id, StageName=stage_name)
    settings = stage.get("DefaultRouteSettings", {})
    logs = stage.get("AccessLogSettings")
    live[section]["stage"] = {
        "name": stage["StageName"], "auto_deploy": stage.get("AutoDeploy", False),
        "throttling": {"rate": settings.get("ThrottlingRateLimit"), "burst": settings.get("ThrottlingBurstLimit")},
        "access_log": None if logs is None else {"destination": logs["DestinationArn"],
                                                 "format": json.loads(logs["Format"])}}


def _flag(value: str | None) -> bool | None:
    return None if value is None else value == "true"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _document(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        from urllib.parse import unquote

        parsed: dict[str, Any] = json.loads(unquote(value))
        return parsed
    return dict(value)
