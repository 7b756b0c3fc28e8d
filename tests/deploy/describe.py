"""template.yaml and infra/ reduced to one comparable description of the deployment.

Both sides become the same plain structure (dicts, lists, sets, ints, strings), where a reference to another
resource is a token "{role.attribute}": the SAM template's `!Ref WakeQueue` and Terraform's
`aws_sqs_queue.wake.url` both become "{wake.url}", `!GetAtt ActorTable.Arn` and `aws_dynamodb_table.actors.arn`
both "{table.arn}", a parameter or variable "{param.max_receives}", and the names' common prefix
("${AWS::StackName}-${Stage}" / "${local.prefix}") "{prefix}". The SAM side is read after the SAM transform
(the functions' event sources are then plain AWS::Lambda::EventSourceMapping resources).

A description is of one scenario: parameter values (Terraform variable names, tests/deploy/roles.py) that
decide the conditions, CloudFormation's `Conditions` / `Fn::If` and Terraform's `count` / ternaries alike
(SCENARIOS lists the ones the tests compare). Anything this reader does not understand raises `Unsupported`,
so a new construct fails the tests loudly instead of comparing as equal by accident.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.deploy.hcl import TerraformModule, one_block
from tests.deploy.roles import PARAMETERS, SAM_ROLES, Unsupported, token_values

__all__ = ["SCENARIOS", "Description", "Unsupported", "describe_sam", "describe_terraform", "differences"]

Description = dict[str, Any]
# Variable values that decide the conditions; every scenario is compared (tests/deploy/test_parity.py)
SCENARIOS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "jwt": {"auth_mode": "jwt", "jwt_issuer": "https://issuer.example.com", "jwt_audience": "aud-1,aud-2"},
    "none": {"auth_mode": "none"},
    "operations": {"alarm_topic_arn": "arn:aws:sns:us-east-1:123456789012:ops", "data_name_prefix": "dormant-dev",
                   "api_reserved_concurrency": -1, "worker_reserved_concurrency": -1,
                   "table_deletion_protection": False, "value_bucket_name": "dormant-dev-values-123456789012"},
    "traced": {"adot_layer_arn": "arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-python-arm64-ver-1-32-0:1"},
}
# What `Ref` returns, per CloudFormation type
_REF_ATTRIBUTE = {
    "AWS::SQS::Queue": "url", "AWS::DynamoDB::Table": "name", "AWS::Logs::LogGroup": "name",
    "AWS::Lambda::Function": "name", "AWS::Lambda::LayerVersion": "arn", "AWS::IAM::Role": "name",
    "AWS::ApiGatewayV2::Api": "id", "AWS::ApiGatewayV2::Integration": "id", "AWS::ApiGatewayV2::Authorizer": "id",
    "AWS::CloudWatch::Alarm": "name", "AWS::Lambda::Alias": "arn", "AWS::S3::Bucket": "name",
}
# Every resource type each reader describes (anything else raises Unsupported: described, or refused). Lambda versions
# and aliases are described through what invokes them (the event sources, the integration: "{worker_alias.arn}").
SAM_TYPES = frozenset({
    "AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::S3::BucketPolicy", "AWS::SQS::Queue", "AWS::Lambda::Function",
    "AWS::Lambda::Version", "AWS::Lambda::Alias", "AWS::Lambda::EventSourceMapping", "AWS::Lambda::Permission",
    "AWS::Lambda::LayerVersion", "AWS::Logs::LogGroup", "AWS::IAM::Role", "AWS::ApiGatewayV2::Api",
    "AWS::ApiGatewayV2::Integration", "AWS::ApiGatewayV2::Authorizer", "AWS::ApiGatewayV2::Route",
    "AWS::ApiGatewayV2::Stage", "AWS::CloudWatch::Alarm"})
TERRAFORM_TYPES = frozenset({
    "aws_dynamodb_table", "aws_s3_bucket", "aws_s3_bucket_server_side_encryption_configuration",
    "aws_s3_bucket_public_access_block", "aws_s3_bucket_ownership_controls", "aws_s3_bucket_versioning",
    "aws_s3_bucket_lifecycle_configuration", "aws_s3_bucket_policy", "aws_sqs_queue", "aws_lambda_function",
    "aws_lambda_alias", "aws_lambda_event_source_mapping", "aws_lambda_permission", "aws_lambda_layer_version",
    "aws_cloudwatch_log_group", "aws_iam_role", "aws_iam_role_policy", "aws_iam_role_policy_attachment",
    "aws_apigatewayv2_api", "aws_apigatewayv2_integration", "aws_apigatewayv2_authorizer", "aws_apigatewayv2_route",
    "aws_apigatewayv2_stage", "aws_cloudwatch_metric_alarm"})
GENERATED = "{generated}"  # a bucket name the deployment tool chooses (CloudFormation, Terraform): unique
_GETATT = {"Arn": "arn", "QueueName": "name"}
SQS_DEFAULTS = {"fifo": False, "content_based_deduplication": None, "deduplication_scope": None,
                "throughput_limit": None, "visibility_timeout": 30, "retention": 345600, "redrive": None,
                "encryption": None, "retained": False}
_NO_VALUE = object()


def _empty() -> Description:
    return {"tables": {}, "buckets": {}, "queues": {}, "functions": {}, "event_sources": {}, "log_groups": {},
            "layers": {}, "iam": {}, "parameters": {}, "http": {"routes": {}, "authorizers": {}, "stage": None},
            "websocket": {"routes": {}, "authorizers": {}, "stage": None},
            "alarms": {}, "permissions": [], "outputs": {}}


# == SAM ======================================================================================================
class _Sam:
    def __init__(self, template: dict[str, Any], values: dict[str, Any]) -> None:
        self.parameters: dict[str, Any] = template.get("Parameters", {})
        for name in self.parameters:
            if name not in PARAMETERS:
                raise Unsupported(f"parameter {name} has no Terraform variable in PARAMETERS")
        self.values = {PARAMETERS[name]: _plain(p.get("Default")) for name, p in self.parameters.items()}
        unknown = set(values) - set(self.values)
        if unknown:
            raise Unsupported(f"scenario sets unknown parameters {sorted(unknown)}")
        self.values.update(values)
        self.conditions: dict[str, Any] = template.get("Conditions", {})
        self.decided: dict[str, bool] = {}
        self.all_resources: dict[str, dict[str, Any]] = template["Resources"]
        for name, resource in self.all_resources.items():
            if resource["Type"] not in SAM_TYPES:
                raise Unsupported(f"resource {name}: the description has no place for a {resource['Type']}")
        self.resources = {name: r for name, r in self.all_resources.items()
                          if "Condition" not in r or self.condition(r["Condition"])}
        self.roles = dict(SAM_ROLES)
        for name, resource in self.all_resources.items():
            if resource["Type"] == "AWS::Lambda::LayerVersion":
                self.roles[name] = "layer"  # SAM adds a content hash to the layer's logical id

    # -- conditions ------------------------------------------------------------------------------------------
    def condition(self, name: str) -> bool:
        if name not in self.decided:
            if name not in self.conditions:
                raise Unsupported(f"condition {name} is not defined")
            self.decided[name] = self.decide(self.conditions[name])
        return self.decided[name]

    def decide(self, node: Any) -> bool:
        if isinstance(node, dict) and len(node) == 1:
            (function, args), = node.items()
            if function == "Fn::Equals":
                left, right = (_cfn_string(self.concrete(a)) for a in args)
                return left == right
            if function == "Fn::Not":
                return not self.decide(args[0])
            if function == "Fn::And":
                return all(self.decide(a) for a in args)
            if function == "Fn::Or":
                return any(self.decide(a) for a in args)
            if function == "Condition":
                return self.condition(args)
        raise Unsupported(f"condition {node!r}")

    def concrete(self, node: Any) -> Any:
        return token_values(self.value(node), self.values)

    # -- values ----------------------------------------------------------------------------------------------
    def ref(self, name: str, attribute: str | None = None) -> str:
        if name in self.parameters:
            return "{param." + PARAMETERS[name] + "}"
        if name.startswith("AWS::"):
            return "{" + name + "}"
        if name not in self.resources:
            raise Unsupported(f"reference to {name}, which the template does not define (in this scenario)")
        kind = self.resources[name]["Type"]
        role = self.roles.get(name)
        if role is None:
            raise Unsupported(f"resource {name} ({kind}) has no role in SAM_ROLES")
        if attribute is None:
            if kind not in _REF_ATTRIBUTE:
                raise Unsupported(f"Ref of a {kind}")
            return "{" + role + "." + _REF_ATTRIBUTE[kind] + "}"
        if attribute not in _GETATT:
            raise Unsupported(f"GetAtt {name}.{attribute}")
        token = "{" + role + "." + _GETATT[attribute] + "}"
        # A log group's Arn attribute ends in ":*" (Terraform's arn does not)
        return token + ":*" if kind == "AWS::Logs::LogGroup" and attribute == "Arn" else token

    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [item for item in (self.value(i) for i in node) if item is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Ref"}:
            return _NO_VALUE if node["Ref"] == "AWS::NoValue" else self.ref(node["Ref"])
        if set(node) == {"Fn::GetAtt"}:
            target = node["Fn::GetAtt"]
            name, attribute = target if isinstance(target, list) else target.split(".", 1)
            return self.ref(name, attribute)
        if set(node) == {"Fn::If"}:
            name, if_true, if_false = node["Fn::If"]
            return self.value(if_true if self.condition(name) else if_false)
        if set(node) == {"Fn::Split"}:
            separator, source = node["Fn::Split"]
            return f"split({separator!r}, {self.value(source)})"
        if set(node) == {"Fn::Sub"}:
            text, local = (node["Fn::Sub"], {}) if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"]

            def substitute(match: re.Match[str]) -> str:
                inner = match.group(1)
                if inner in local:
                    return str(self.value(local[inner]))
                name, _, attribute = inner.partition(".")
                return self.ref(name, attribute or None)
            return _prefix(re.sub(r"\$\{([^}]+)\}", substitute, text))
        if any(key.startswith("Fn::") for key in node):
            raise Unsupported(f"intrinsic function {sorted(node)}")
        return {key: item for key, item in ((k, self.value(v)) for k, v in node.items()) if item is not _NO_VALUE}

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        found = {}
        for name, resource in self.resources.items():
            if resource["Type"] == kind:
                if name not in self.roles:
                    raise Unsupported(f"resource {name} ({kind}) has no role in SAM_ROLES")
                found[self.roles[name]] = {**self.value(resource.get("Properties", {})),
                                           "__retained": resource.get("DeletionPolicy") == "Retain"
                                           and resource.get("UpdateReplacePolicy") == "Retain"}
        return found

    def of_type_any(self, kind: str) -> list[dict[str, Any]]:
        """Every resource of a type, roles or not (SAM's generated event source mappings)."""
        return [self.value(r.get("Properties", {})) for r in self.resources.values() if r["Type"] == kind]


def _prefix(text: str) -> str:
    return text.replace("{AWS::StackName}-{param.stage}", "{prefix}")


def _cfn_string(value: Any) -> str:
    """How CloudFormation compares parameter values: as strings."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def describe_sam(translated: dict[str, Any], values: dict[str, Any] | None = None) -> Description:
    """The description of a SAM template after the SAM transform (see support.translate), in a scenario."""
    sam = _Sam(translated, values or {})
    described = _empty()
    for role, p in sam.of_type("AWS::DynamoDB::Table").items():
        described["tables"][role] = {
            "name": p.get("TableName"),
            "billing_mode": p.get("BillingMode", "PROVISIONED"),
            "attributes": {a["AttributeName"]: a["AttributeType"] for a in p["AttributeDefinitions"]},
            "keys": {k["AttributeName"]: k["KeyType"] for k in p["KeySchema"]},
            "local_indexes": {i["IndexName"]: {"keys": {k["AttributeName"]: k["KeyType"] for k in i["KeySchema"]},
                                               "projection": i["Projection"]["ProjectionType"]}
                              for i in p.get("LocalSecondaryIndexes", [])},
            "global_indexes": {i["IndexName"]: {"keys": {k["AttributeName"]: k["KeyType"] for k in i["KeySchema"]},
                                                "projection": i["Projection"]["ProjectionType"]}
                               for i in p.get("GlobalSecondaryIndexes", [])},
            "ttl": ({"attribute": p["TimeToLiveSpecification"]["AttributeName"],
                     "enabled": p["TimeToLiveSpecification"]["Enabled"]} if "TimeToLiveSpecification" in p else None),
            "point_in_time_recovery": p.get("PointInTimeRecoverySpecification", {}).get(
                "PointInTimeRecoveryEnabled", False),
            "deletion_protection": p.get("DeletionProtectionEnabled", False),
            "retained": p["__retained"],
        }
    _describe_sam_buckets(sam, described)
    for role, p in sam.of_type("AWS::SQS::Queue").items():
        redrive = p.get("RedrivePolicy")
        described["queues"][role] = {
            **SQS_DEFAULTS,
            "name": p.get("QueueName"),
            "fifo": p.get("FifoQueue", False),
            "content_based_deduplication": p.get("ContentBasedDeduplication"),
            "deduplication_scope": p.get("DeduplicationScope"),
            "throughput_limit": p.get("FifoThroughputLimit"),
            "visibility_timeout": p.get("VisibilityTimeout", 30),
            "retention": p.get("MessageRetentionPeriod", 345600),
            "redrive": None if redrive is None else {"target": redrive["deadLetterTargetArn"],
                                                     "max_receives": redrive["maxReceiveCount"]},
            "encryption": _encryption(p.get("SqsManagedSseEnabled"), p.get("KmsMasterKeyId")),
            "retained": p["__retained"],
        }
    for role, p in sam.of_type("AWS::Lambda::Function").items():
        described["functions"][role] = {
            "name": p.get("FunctionName"), "handler": p["Handler"], "runtime": p["Runtime"],
            "architectures": p.get("Architectures", ["x86_64"]), "memory": p.get("MemorySize", 128),
            "timeout": p.get("Timeout", 3), "role": p["Role"],
            "environment": p.get("Environment", {}).get("Variables", {}),
            "log_group": p.get("LoggingConfig", {}).get("LogGroup"), "layers": p.get("Layers", []),
            "log_format": p.get("LoggingConfig", {}).get("LogFormat", "Text"),
            "system_log_level": p.get("LoggingConfig", {}).get("SystemLogLevel"),
            "reserved_concurrency": _reserved(p.get("ReservedConcurrentExecutions"), sam.values),
            "snap_start": p.get("SnapStart", {}).get("ApplyOn", "None"),
            "tracing": p.get("TracingConfig", {}).get("Mode", "PassThrough"),
        }
    for p in sam.of_type_any("AWS::Lambda::EventSourceMapping"):
        described["event_sources"][(p["FunctionName"], p["EventSourceArn"])] = {
            "batch_size": p.get("BatchSize"), "batching_window": p.get("MaximumBatchingWindowInSeconds"),
            "response_types": sorted(p.get("FunctionResponseTypes", [])), "enabled": p.get("Enabled", True),
            "max_concurrency": p.get("ScalingConfig", {}).get("MaximumConcurrency")}
    for role, p in sam.of_type("AWS::Logs::LogGroup").items():
        described["log_groups"][role] = {"name": p.get("LogGroupName"), "retention": p.get("RetentionInDays")}
    for role, p in sam.of_type("AWS::Lambda::LayerVersion").items():
        described["layers"][role] = {"runtimes": p.get("CompatibleRuntimes"),
                                     "architectures": p.get("CompatibleArchitectures")}
    for role, p in sam.of_type("AWS::IAM::Role").items():
        assume = p["AssumeRolePolicyDocument"]["Statement"]
        described["iam"][role] = {
            "assumed_by": sorted(_as_list(s["Principal"]["Service"])[0] for s in assume),
            "statements": {_statement(s.get("Sid"), s["Effect"], s["Action"],
                                      [_execution_arn(r) for r in _as_list(s["Resource"])])
                           for policy in p.get("Policies", []) for s in policy["PolicyDocument"]["Statement"]},
            "managed_policies": sorted(p.get("ManagedPolicyArns", [])),
        }
    _describe_sam_http(sam, described)
    for role, p in sam.of_type("AWS::CloudWatch::Alarm").items():
        described["alarms"][role] = _alarm(
            p.get("AlarmName"), p.get("Namespace"), p.get("MetricName"),
            {d["Name"]: d["Value"] for d in p.get("Dimensions", [])}, p.get("Statistic"), p.get("Period"),
            p.get("EvaluationPeriods"), p.get("Threshold"), p.get("ComparisonOperator"), p.get("TreatMissingData"),
            p.get("AlarmActions", []), p.get("OKActions", []))
    described["permissions"] = sorted(
        (p["FunctionName"], p["Principal"], p["Action"], _execution_arn(p.get("SourceArn")))
        for p in sam.of_type_any("AWS::Lambda::Permission"))
    for name, output in translated.get("Outputs", {}).items():
        value = sam.value(output["Value"])
        if value == "https://{http_api.id}.execute-api.{AWS::Region}.{AWS::URLSuffix}/":
            value = "{http_api.url}"
        if value == "wss://{realtime_api.id}.execute-api.{AWS::Region}.{AWS::URLSuffix}/{param.stage}":
            value = "{realtime_api.url}"  # Terraform: the stage's invoke_url
        described["outputs"][_snake(name)] = value
    for name, definition in sam.parameters.items():
        described["parameters"][PARAMETERS[name]] = _plain(definition.get("Default"))
    return described


def _describe_sam_buckets(sam: _Sam, described: Description) -> None:
    for role, p in sam.of_type("AWS::S3::Bucket").items():
        encryption = [rule["ServerSideEncryptionByDefault"] for rule in p.get("BucketEncryption", {}).get(
            "ServerSideEncryptionConfiguration", [])]
        block = p.get("PublicAccessBlockConfiguration")
        described["buckets"][role] = {
            "name": p.get("BucketName", GENERATED),
            "encryption": _bucket_encryption(encryption[0]["SSEAlgorithm"] if encryption else None,
                                             encryption[0].get("KMSMasterKeyID") if encryption else None),
            "public_access_block": None if block is None else {
                "block_public_acls": block.get("BlockPublicAcls", False),
                "block_public_policy": block.get("BlockPublicPolicy", False),
                "ignore_public_acls": block.get("IgnorePublicAcls", False),
                "restrict_public_buckets": block.get("RestrictPublicBuckets", False)},
            "ownership": [r["ObjectOwnership"] for r in p.get("OwnershipControls", {}).get("Rules", [])],
            "versioning": p.get("VersioningConfiguration", {}).get("Status"),
            "lifecycle": sorted((lifecycle_rule(r["Id"], r["Status"], r.get("Prefix"), r.get("ExpirationInDays"),
                                                 r.get("AbortIncompleteMultipartUpload", {}).get("DaysAfterInitiation"))
                                 for r in p.get("LifecycleConfiguration", {}).get("Rules", [])), key=str),
            "retained": p["__retained"],
            "policy": set(),
        }
    for p in sam.of_type("AWS::S3::BucketPolicy").values():
        bucket = _bucket_of(p["Bucket"], described)
        bucket["policy"].update(policy_statement(s) for s in p["PolicyDocument"]["Statement"])


def policy_statement(s: dict[str, Any]) -> tuple[Any, ...]:
    """A bucket policy's statement as JSON has it (the template, S3's GetBucketPolicy), made comparable."""
    principal = s.get("Principal")
    return bucket_statement(s.get("Sid"), s["Effect"], s["Action"], s["Resource"],
                            "*" if principal in ("*", {"AWS": "*"}) else json.dumps(principal, sort_keys=True),
                            {(test, variable, tuple(_as_list(value))) for test, pairs in s.get("Condition", {}).items()
                             for variable, value in pairs.items()})


def _bucket_of(token: Any, described: Description) -> dict[str, Any]:
    """The described bucket a sub-resource names ("{values.name}" in the template, "{values.id}" in Terraform)."""
    match = re.fullmatch(r"\{(\w+)\.(?:name|id)\}", str(token))
    if match is None or match.group(1) not in described["buckets"]:
        raise Unsupported(f"a bucket's setting on {token}, which is not a described bucket")
    bucket: dict[str, Any] = described["buckets"][match.group(1)]
    return bucket


def _bucket_encryption(algorithm: Any, kms_key: Any) -> str | None:
    if algorithm is None:
        return None
    return "kms" if algorithm in ("aws:kms", "aws:kms:dsse") or kms_key else str(algorithm)


def lifecycle_rule(rule_id: Any, status: Any, prefix: Any, expiration_days: Any, abort_days: Any) -> dict[str, Any]:
    return {"id": rule_id, "status": status, "prefix": prefix or "", "expiration_days": expiration_days,
            "abort_incomplete_upload_days": abort_days}


def bucket_statement(sid: Any, effect: Any, actions: Any, resources: Any, principal: str,
                      conditions: set[tuple[Any, ...]]) -> tuple[Any, ...]:
    return (sid, effect, frozenset(_as_list(actions)), frozenset(_as_list(resources)), principal,
            frozenset(conditions))


def _describe_sam_http(sam: _Sam, described: Description) -> None:
    integrations = sam.of_type("AWS::ApiGatewayV2::Integration")
    for role, p in sam.of_type("AWS::ApiGatewayV2::Route").items():
        integration = _integration(p["Target"], integrations)
        described[_api_of(p["ApiId"])]["routes"][p["RouteKey"]] = {
            "role": role, "target": _function_of(integration["IntegrationUri"]),
            "payload": integration.get("PayloadFormatVersion"), "integration": integration["IntegrationType"],
            "authorization": p.get("AuthorizationType", "NONE"), "authorizer": p.get("AuthorizerId")}
    for role, p in sam.of_type("AWS::ApiGatewayV2::Authorizer").items():
        jwt = p.get("JwtConfiguration", {})
        uri = p.get("AuthorizerUri")  # a Lambda (REQUEST) authorizer's function
        described[_api_of(p["ApiId"])]["authorizers"][role] = {
            "type": p["AuthorizerType"], "identity_sources": p.get("IdentitySource"),
            "issuer": jwt.get("Issuer"), "audience": jwt.get("Audience"),
            "function": None if uri is None else _function_of(uri)}
    for p in sam.of_type("AWS::ApiGatewayV2::Stage").values():
        routes = p.get("DefaultRouteSettings", {})
        logs = p.get("AccessLogSettings")
        described[_api_of(p["ApiId"])]["stage"] = {
            "name": p["StageName"], "auto_deploy": p.get("AutoDeploy", False),
            "throttling": {"rate": routes.get("ThrottlingRateLimit"), "burst": routes.get("ThrottlingBurstLimit")},
            "access_log": None if logs is None else {"destination": logs["DestinationArn"].removesuffix(":*"),
                                                     "format": json.loads(logs["Format"])}}


def _api_of(api_id: str) -> str:
    """Which API a route or stage belongs to: the HTTP API ("http") or the WebSocket API ("websocket")."""
    apis = {"{http_api.id}": "http", "{realtime_api.id}": "websocket"}
    if api_id not in apis:
        raise Unsupported(f"api id {api_id}")
    return apis[api_id]


def _integration(target: str, integrations: dict[str, dict[str, Any]]) -> dict[str, Any]:
    match = re.fullmatch(r"integrations/\{(\w+)\.id\}", target)
    if match is None or match.group(1) not in integrations:
        raise Unsupported(f"route target {target}")
    return integrations[match.group(1)]


def _execution_arn(source: str | None) -> str | None:
    """The API's execute-api ARN, written out in the template (`arn:${AWS::Partition}:execute-api:...`)."""
    if source is None:
        return None
    return re.sub(r"arn:\{AWS::Partition\}:execute-api:\{AWS::Region\}:\{AWS::AccountId\}:\{(\w+)\.id\}",
                  r"{\1.execution_arn}", source)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _function_of(uri: str) -> str:
    """The function an API integration calls ("{api.arn}" in the template, "{api.invoke_arn}" in Terraform)."""
    found = re.findall(r"\{(\w+)\.(?:arn|invoke_arn)\}", uri)
    if len(found) != 1:
        raise Unsupported(f"integration URI {uri}")
    return str(found[0])


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statement(sid: str | None, effect: str, actions: Any, resources: Any) -> tuple[Any, ...]:
    return (sid, effect, frozenset(_as_list(actions)), frozenset(_as_list(resources)))


def _plain(value: Any) -> Any:
    """Parameter defaults: CloudFormation strings like "false" or "5" compare with Terraform's false / 5."""
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value


def _encryption(sse_sqs: Any, kms_key: Any) -> str | None:
    if kms_key:
        return "kms"
    return "sse-sqs" if sse_sqs in (True, "true") else None


def _reserved(value: Any, values: dict[str, Any]) -> Any:
    """Reserved concurrency: none set, or -1 (Terraform's "no reservation"), is -1."""
    return -1 if value is None or token_values(value, values) == -1 else value


def _alarm(name: Any, namespace: Any, metric: Any, dimensions: dict[str, Any], statistic: Any, period: Any,
           evaluation_periods: Any, threshold: Any, comparison: Any, missing: Any, actions: list[Any],
           ok_actions: list[Any]) -> dict[str, Any]:
    return {"name": name, "metric": (namespace, metric), "dimensions": dimensions, "statistic": statistic,
            "period": period, "evaluation_periods": evaluation_periods, "threshold": float(threshold),
            "comparison": comparison, "missing_data": missing, "actions": actions, "ok_actions": ok_actions}


# == Terraform ================================================================================================
def describe_terraform(directory: Path, texts: dict[str, str] | None = None,
                       values: dict[str, Any] | None = None) -> Description:
    """The description of the Terraform module in `directory` (or of `texts`: file name -> content)."""
    tf = TerraformModule(directory, texts, values)
    v, get = tf.value, tf.get
    for address in tf.resources:
        if address.split(".")[0] not in TERRAFORM_TYPES:
            raise Unsupported(f"resource {address}: the description has no place for it")
    described = _empty()
    for role, body in tf.of_type("aws_dynamodb_table").items():
        ttl = one_block(body["ttl"]) if "ttl" in body else None
        hash_key = v(body["hash_key"])
        keys = {hash_key: "HASH"}
        if "range_key" in body:
            keys[v(body["range_key"])] = "RANGE"
        described["tables"][role] = {
            "name": get(body, "name"),
            "billing_mode": get(body, "billing_mode", "PROVISIONED"),
            "attributes": {v(a["name"]): v(a["type"]) for a in body["attribute"]},
            "keys": keys,
            # an LSI shares the table's hash key
            "local_indexes": {v(i["name"]): {"keys": {hash_key: "HASH", v(i["range_key"]): "RANGE"},
                                             "projection": v(i["projection_type"])}
                              for i in body.get("local_secondary_index", [])},
            "global_indexes": {v(i["name"]): {"keys": {v(i["hash_key"]): "HASH", **({v(i["range_key"]): "RANGE"}
                                                                                      if "range_key" in i else {})},
                                              "projection": v(i["projection_type"])}
                               for i in body.get("global_secondary_index", [])},
            "ttl": None if ttl is None else {"attribute": v(ttl["attribute_name"]), "enabled": v(ttl["enabled"])},
            "point_in_time_recovery": v(one_block(body["point_in_time_recovery"])["enabled"])
            if "point_in_time_recovery" in body else False,
            "deletion_protection": get(body, "deletion_protection_enabled", False),
            "retained": _prevents_destroy(tf, body),
        }
    _describe_terraform_buckets(tf, described)
    for role, body in tf.of_type("aws_sqs_queue").items():
        redrive = get(body, "redrive_policy")
        described["queues"][role] = {
            **SQS_DEFAULTS,
            "name": get(body, "name"),
            "fifo": get(body, "fifo_queue", False),
            "content_based_deduplication": get(body, "content_based_deduplication"),
            "deduplication_scope": get(body, "deduplication_scope"),
            "throughput_limit": get(body, "fifo_throughput_limit"),
            "visibility_timeout": get(body, "visibility_timeout_seconds", 30),
            "retention": get(body, "message_retention_seconds", 345600),
            "redrive": None if redrive is None else {"target": redrive["deadLetterTargetArn"],
                                                     "max_receives": redrive["maxReceiveCount"]},
            "encryption": _encryption(get(body, "sqs_managed_sse_enabled"), get(body, "kms_master_key_id")),
            "retained": _prevents_destroy(tf, body),
        }
    for role, body in tf.of_type("aws_lambda_function").items():
        described["functions"][role] = {
            "name": get(body, "function_name"), "handler": v(body["handler"]), "runtime": v(body["runtime"]),
            "architectures": get(body, "architectures", ["x86_64"]), "memory": get(body, "memory_size", 128),
            "timeout": get(body, "timeout", 3), "role": v(body["role"]),
            "environment": v(one_block(body["environment"])["variables"]) if "environment" in body else {},
            "log_group": v(one_block(body["logging_config"])["log_group"]) if "logging_config" in body else None,
            "log_format": v(one_block(body["logging_config"]).get("log_format", "Text"))
            if "logging_config" in body else "Text",
            "system_log_level": v(one_block(body["logging_config"]).get("system_log_level"))
            if "logging_config" in body else None,
            "layers": get(body, "layers", []),
            "reserved_concurrency": _reserved(get(body, "reserved_concurrent_executions"), tf.values),
            "snap_start": v(one_block(body["snap_start"])["apply_on"]) if "snap_start" in body else "None",
            "tracing": v(one_block(body["tracing_config"])["mode"]) if "tracing_config" in body else "PassThrough",
        }
    for body in tf.resources_of("aws_lambda_event_source_mapping"):
        scaling = v(one_block(body["scaling_config"])) if "scaling_config" in body else {}
        described["event_sources"][(v(body["function_name"]), v(body["event_source_arn"]))] = {
            "batch_size": get(body, "batch_size"),
            "batching_window": get(body, "maximum_batching_window_in_seconds"),
            "response_types": sorted(get(body, "function_response_types", [])),
            "enabled": get(body, "enabled", True), "max_concurrency": scaling.get("maximum_concurrency")}
    for role, body in tf.of_type("aws_cloudwatch_log_group").items():
        described["log_groups"][role] = {"name": get(body, "name"), "retention": get(body, "retention_in_days")}
    for role, body in tf.of_type("aws_lambda_layer_version").items():
        described["layers"][role] = {"runtimes": get(body, "compatible_runtimes"),
                                     "architectures": get(body, "compatible_architectures")}
    documents = {address: body for address, body in tf.data.items()
                 if address.startswith("data.aws_iam_policy_document.")}
    for role, body in tf.of_type("aws_iam_role").items():
        assume = documents[_data_address(body["assume_role_policy"])]
        policies = [p for p in tf.resources_of("aws_iam_role_policy") if v(p["role"]) == "{" + role + ".id}"]
        described["iam"][role] = {
            "assumed_by": sorted(v(one_block(s["principals"])["identifiers"])[0] for s in assume["statement"]),
            "statements": {_statement(get(s, "sid"), get(s, "effect", "Allow"), v(s["actions"]), v(s["resources"]))
                           for p in policies for s in documents[_data_address(p["policy"])]["statement"]},
            "managed_policies": sorted(v(p["policy_arn"]) for p in tf.resources_of("aws_iam_role_policy_attachment")
                                       if v(p["role"]) in ("{" + role + ".id}", "{" + role + ".name}")),
        }
    _describe_terraform_http(tf, described)
    for role, body in tf.of_type("aws_cloudwatch_metric_alarm").items():
        described["alarms"][role] = _alarm(
            get(body, "alarm_name"), get(body, "namespace"), get(body, "metric_name"), get(body, "dimensions", {}),
            get(body, "statistic"), get(body, "period"), get(body, "evaluation_periods"), get(body, "threshold"),
            get(body, "comparison_operator"), get(body, "treat_missing_data"), get(body, "alarm_actions", []),
            get(body, "ok_actions", []))
    described["permissions"] = sorted((v(p["function_name"]), v(p["principal"]), v(p["action"]),
                                       get(p, "source_arn")) for p in tf.resources_of("aws_lambda_permission"))
    for name, output in tf.outputs.items():
        described["outputs"][name] = v(output["value"])
    for name, definition in tf.variables.items():
        if name in PARAMETERS.values():
            described["parameters"][name] = definition.get("default")
    return described


def _describe_terraform_buckets(tf: TerraformModule, described: Description) -> None:
    v, get = tf.value, tf.get
    for role, body in tf.of_type("aws_s3_bucket").items():
        if "bucket_prefix" in body:
            raise Unsupported(f"bucket {role}: bucket_prefix (template.yaml names it, or lets CloudFormation)")
        described["buckets"][role] = {"name": get(body, "bucket", GENERATED), "encryption": None,
                                      "public_access_block": None, "ownership": [], "versioning": None,
                                      "lifecycle": [], "retained": _prevents_destroy(tf, body), "policy": set()}
    for body in tf.resources_of("aws_s3_bucket_server_side_encryption_configuration"):
        default = one_block(one_block(body["rule"])["apply_server_side_encryption_by_default"])
        _bucket_of(v(body["bucket"]), described)["encryption"] = _bucket_encryption(
            get(default, "sse_algorithm"), get(default, "kms_master_key_id"))
    for body in tf.resources_of("aws_s3_bucket_public_access_block"):
        _bucket_of(v(body["bucket"]), described)["public_access_block"] = {
            name: get(body, name, False) for name in ("block_public_acls", "block_public_policy",
                                                      "ignore_public_acls", "restrict_public_buckets")}
    for body in tf.resources_of("aws_s3_bucket_ownership_controls"):
        _bucket_of(v(body["bucket"]), described)["ownership"] = [v(r["object_ownership"]) for r in body["rule"]]
    for body in tf.resources_of("aws_s3_bucket_versioning"):
        _bucket_of(v(body["bucket"]), described)["versioning"] = v(one_block(body["versioning_configuration"])[
            "status"])
    for body in tf.resources_of("aws_s3_bucket_lifecycle_configuration"):
        rules = []
        for rule in body["rule"]:
            prefix = get(one_block(rule["filter"]), "prefix") if "filter" in rule else None
            expiration = get(one_block(rule["expiration"]), "days") if "expiration" in rule else None
            abort = get(one_block(rule["abort_incomplete_multipart_upload"]), "days_after_initiation") \
                if "abort_incomplete_multipart_upload" in rule else None
            rules.append(lifecycle_rule(v(rule["id"]), v(rule["status"]), prefix, expiration, abort))
        _bucket_of(v(body["bucket"]), described)["lifecycle"] = sorted(rules, key=str)
    for body in tf.resources_of("aws_s3_bucket_policy"):
        document = tf.data[_data_address(body["policy"])]
        for s in document["statement"]:
            principals = [v(p) for p in s.get("principals", [])]
            principal = "*" if principals == [{"type": "*", "identifiers": ["*"]}] else json.dumps(principals)
            _bucket_of(v(body["bucket"]), described)["policy"].add(bucket_statement(
                get(s, "sid"), get(s, "effect", "Allow"), v(s["actions"]), v(s["resources"]), principal,
                {(v(c["test"]), v(c["variable"]), tuple(v(c["values"]))) for c in s.get("condition", [])}))


def _describe_terraform_http(tf: TerraformModule, described: Description) -> None:
    v, get = tf.value, tf.get
    integrations = tf.of_type("aws_apigatewayv2_integration")
    for role, route in tf.of_type("aws_apigatewayv2_route").items():
        integration = _integration(v(route["target"]), integrations)
        described[_api_of(v(route["api_id"]))]["routes"][v(route["route_key"])] = {
            "role": role, "target": _function_of(v(integration["integration_uri"])),
            "payload": get(integration, "payload_format_version"), "integration": v(integration["integration_type"]),
            "authorization": get(route, "authorization_type", "NONE"), "authorizer": get(route, "authorizer_id")}
    for role, body in tf.of_type("aws_apigatewayv2_authorizer").items():
        jwt = v(one_block(body["jwt_configuration"])) if "jwt_configuration" in body else {}
        uri = get(body, "authorizer_uri")  # a Lambda (REQUEST) authorizer's function
        described[_api_of(v(body["api_id"]))]["authorizers"][role] = {
            "type": v(body["authorizer_type"]), "identity_sources": get(body, "identity_sources"),
            "issuer": jwt.get("issuer"), "audience": jwt.get("audience"),
            "function": None if uri is None else _function_of(uri)}
    for stage in tf.of_type("aws_apigatewayv2_stage").values():
        routes = v(one_block(stage["default_route_settings"])) if "default_route_settings" in stage else {}
        logs = v(one_block(stage["access_log_settings"])) if "access_log_settings" in stage else None
        described[_api_of(v(stage["api_id"]))]["stage"] = {
            "name": v(stage["name"]), "auto_deploy": get(stage, "auto_deploy", False),
            "throttling": {"rate": routes.get("throttling_rate_limit"), "burst": routes.get("throttling_burst_limit")},
            "access_log": None if logs is None else {"destination": logs["destination_arn"],
                                                     "format": logs["format"]}}


def _prevents_destroy(tf: TerraformModule, body: dict[str, Any]) -> bool:
    lifecycle = body.get("lifecycle")
    return bool(lifecycle) and tf.get(one_block(lifecycle), "prevent_destroy", False) is True


def _data_address(expression: str) -> str:
    match = re.fullmatch(r"\$\{(data\.aws_iam_policy_document\.\w+)(?:\[0\])?\.json\}", expression)  # [0]: count
    if match is None:
        raise Unsupported(f"policy {expression}: expected data.aws_iam_policy_document.<name>.json")
    return match.group(1)


# == comparing ================================================================================================
def differences(left: Any, right: Any, path: str = "") -> list[str]:
    """Readable differences between two descriptions ("path: left != right")."""
    if isinstance(left, dict) and isinstance(right, dict):
        found: list[str] = []
        for key in sorted(set(left) | set(right), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in left:
                found.append(f"{where}: only in the second ({right[key]!r})")
            elif key not in right:
                found.append(f"{where}: only in the first ({left[key]!r})")
            else:
                found += differences(left[key], right[key], where)
        return found
    if isinstance(left, set) and isinstance(right, set):
        return [f"{path}: {sorted(map(str, left - right))} only in the first, "
                f"{sorted(map(str, right - left))} only in the second"] if left != right else []
    return [] if left == right else [f"{path}: {left!r} != {right!r}"]
