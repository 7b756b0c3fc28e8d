"""template.yaml and infra/ reduced to one comparable description of the deployment.

Both sides become the same plain structure (dicts, lists, sets, ints, strings), where a reference to another
resource is a token "{role.attribute}": the SAM template's `!Ref WakeQueue` and Terraform's
`aws_sqs_queue.wake.url` both become "{wake.url}", `!GetAtt ActorTable.Arn` and `aws_dynamodb_table.actors.arn`
both "{table.arn}", a parameter or variable "{param.max_receives}", and the names' common prefix
("${AWS::StackName}-${Stage}" / "${local.prefix}") "{prefix}". The SAM side is read after the SAM transform
(the functions' event sources are then plain AWS::Lambda::EventSourceMapping resources).

Anything this reader does not understand raises `Unsupported`, so a new construct fails the tests loudly
instead of comparing as equal by accident.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

Description = dict[str, Any]


class Unsupported(Exception):
    """A construct the description reader does not know (extend the reader, do not ignore it)."""


# -- the roles every resource plays, by SAM logical id and by Terraform address -----------------------------
SAM_ROLES = {
    "ActorTable": "table", "WakeQueue": "wake", "TimerQueue": "timers", "WakeDeadLetterQueue": "wake_dlq",
    "TimerDeadLetterQueue": "timers_dlq", "WorkerFunction": "worker", "ApiFunction": "api",
    "WorkerRole": "worker_role", "ApiRole": "api_role", "WorkerLogGroup": "worker_logs", "ApiLogGroup": "api_logs",
    "HttpApi": "http_api", "WorkerFunctionAliaslive": "worker_alias", "ApiFunctionAliaslive": "api_alias",
}
TF_ROLES = {
    "aws_dynamodb_table.actors": "table", "aws_sqs_queue.wake": "wake", "aws_sqs_queue.timers": "timers",
    "aws_sqs_queue.wake_dlq": "wake_dlq", "aws_sqs_queue.timers_dlq": "timers_dlq",
    "aws_lambda_function.worker": "worker", "aws_lambda_function.api": "api", "aws_iam_role.worker": "worker_role",
    "aws_iam_role.api": "api_role", "aws_cloudwatch_log_group.worker": "worker_logs",
    "aws_cloudwatch_log_group.api": "api_logs", "aws_lambda_layer_version.dependencies": "layer",
    "aws_apigatewayv2_api.http": "http_api", "aws_lambda_alias.worker": "worker_alias",
    "aws_lambda_alias.api": "api_alias",
}
# SAM parameter -> Terraform variable (both shown as "{param.<variable>}")
PARAMETERS = {
    "Stage": "stage", "App": "app", "InspectorToken": "inspector_token_parameter", "MaxReceives": "max_receives",
    "TableDeletionProtection": "table_deletion_protection", "LogRetentionDays": "log_retention_days",
    "SnapStart": "snap_start",
}
# What `Ref` returns, per CloudFormation type
_REF_ATTRIBUTE = {
    "AWS::SQS::Queue": "url", "AWS::DynamoDB::Table": "name", "AWS::Logs::LogGroup": "name",
    "AWS::Lambda::Function": "name", "AWS::Lambda::LayerVersion": "arn", "AWS::IAM::Role": "name",
    "AWS::ApiGatewayV2::Api": "id", "AWS::Lambda::Alias": "arn",
}
_GETATT = {"Arn": "arn", "QueueName": "name"}
# Terraform attribute -> the same attribute's token name
_TF_ATTRIBUTE = {"url": "url", "arn": "arn", "name": "name", "function_name": "name", "id": "id",
                 "invoke_arn": "invoke_arn"}
SQS_DEFAULTS = {"fifo": False, "content_based_deduplication": None, "deduplication_scope": None,
                "throughput_limit": None, "visibility_timeout": 30, "retention": 345600, "redrive": None}


# == SAM ======================================================================================================
class _Sam:
    def __init__(self, template: dict[str, Any]) -> None:
        self.resources: dict[str, dict[str, Any]] = template["Resources"]
        self.parameters: dict[str, Any] = template.get("Parameters", {})
        self.roles = dict(SAM_ROLES)
        for name, resource in self.resources.items():
            if resource["Type"] == "AWS::Lambda::LayerVersion":
                self.roles[name] = "layer"  # SAM adds a content hash to the layer's logical id

    def ref(self, name: str, attribute: str | None = None) -> str:
        if name in self.parameters:
            if name not in PARAMETERS:
                raise Unsupported(f"parameter {name} has no Terraform variable in PARAMETERS")
            return "{param." + PARAMETERS[name] + "}"
        if name.startswith("AWS::"):
            return "{" + name + "}"
        if name not in self.resources:
            raise Unsupported(f"reference to {name}, which the template does not define")
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
            return [self.value(item) for item in node]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Ref"}:
            return self.ref(node["Ref"])
        if set(node) == {"Fn::GetAtt"}:
            target = node["Fn::GetAtt"]
            name, attribute = target if isinstance(target, list) else target.split(".", 1)
            return self.ref(name, attribute)
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
        return {key: self.value(item) for key, item in node.items()}

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        found = {}
        for name, resource in self.resources.items():
            if resource["Type"] == kind:
                if name not in self.roles:
                    raise Unsupported(f"resource {name} ({kind}) has no role in SAM_ROLES")
                found[self.roles[name]] = self.value(resource.get("Properties", {}))
        return found

    def of_type_any(self, kind: str) -> list[dict[str, Any]]:
        """Every resource of a type, roles or not (SAM's generated permissions, event source mappings)."""
        return [self.value(r.get("Properties", {})) for r in self.resources.values() if r["Type"] == kind]


def _prefix(text: str) -> str:
    return text.replace("{AWS::StackName}-{param.stage}", "{prefix}")


def describe_sam(translated: dict[str, Any]) -> Description:
    """The description of a SAM template after the SAM transform (see support.translate)."""
    sam = _Sam(translated)
    tables = sam.of_type("AWS::DynamoDB::Table")
    description: Description = {"tables": {}, "queues": {}, "functions": {}, "event_sources": {}, "log_groups": {},
                                "layers": {}, "iam": {}, "parameters": {}, "http": {}, "outputs": {}}
    for role, p in tables.items():
        description["tables"][role] = {
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
        }
    for role, p in sam.of_type("AWS::SQS::Queue").items():
        redrive = p.get("RedrivePolicy")
        description["queues"][role] = {
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
        }
    for role, p in sam.of_type("AWS::Lambda::Function").items():
        description["functions"][role] = {
            "name": p.get("FunctionName"), "handler": p["Handler"], "runtime": p["Runtime"],
            "architectures": p.get("Architectures", ["x86_64"]), "memory": p.get("MemorySize", 128),
            "timeout": p.get("Timeout", 3), "role": p["Role"],
            "environment": p.get("Environment", {}).get("Variables", {}),
            "log_group": p.get("LoggingConfig", {}).get("LogGroup"), "layers": p.get("Layers", []),
            "snap_start": p.get("SnapStart", {}).get("ApplyOn", "None"),
        }
    for p in sam.of_type_any("AWS::Lambda::EventSourceMapping"):
        description["event_sources"][(p["FunctionName"], p["EventSourceArn"])] = {
            "batch_size": p.get("BatchSize"), "batching_window": p.get("MaximumBatchingWindowInSeconds"),
            "response_types": sorted(p.get("FunctionResponseTypes", [])), "enabled": p.get("Enabled", True)}
    for role, p in sam.of_type("AWS::Logs::LogGroup").items():
        description["log_groups"][role] = {"name": p.get("LogGroupName"), "retention": p.get("RetentionInDays")}
    for role, p in sam.of_type("AWS::Lambda::LayerVersion").items():
        description["layers"][role] = {"runtimes": p.get("CompatibleRuntimes"),
                                       "architectures": p.get("CompatibleArchitectures")}
    for role, p in sam.of_type("AWS::IAM::Role").items():
        assume = p["AssumeRolePolicyDocument"]["Statement"]
        description["iam"][role] = {
            "assumed_by": sorted(_as_list(s["Principal"]["Service"])[0] for s in assume),
            "statements": {_statement(s.get("Sid"), s["Effect"], s["Action"], s["Resource"])
                           for policy in p.get("Policies", []) for s in policy["PolicyDocument"]["Statement"]},
            "managed_policies": sorted(p.get("ManagedPolicyArns", [])),
        }
    for role, p in sam.of_type("AWS::ApiGatewayV2::Api").items():
        routes = p["Body"]["paths"]
        description["http"][role] = {
            route: {"payload": method["x-amazon-apigateway-integration"]["payloadFormatVersion"],
                    "target": _function_of(method["x-amazon-apigateway-integration"]["uri"])}
            for route, methods in routes.items() for method in methods.values()}
    for resource in sam.resources.values():
        if resource["Type"] == "AWS::ApiGatewayV2::Stage":
            description["http"]["stage"] = resource["Properties"]["StageName"]
    description["permissions"] = sorted(
        (p["FunctionName"], p["Principal"], p["Action"]) for p in sam.of_type_any("AWS::Lambda::Permission"))
    for name, output in translated.get("Outputs", {}).items():
        value = sam.value(output["Value"])
        if value == "https://{http_api.id}.execute-api.{AWS::Region}.{AWS::URLSuffix}/":
            value = "{http_api.url}"
        description["outputs"][_snake(name)] = value
    for name, definition in sam.parameters.items():
        if name not in PARAMETERS:
            raise Unsupported(f"parameter {name} has no Terraform variable in PARAMETERS")
        description["parameters"][PARAMETERS[name]] = _plain(definition.get("Default"))
    return description


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _function_of(uri: str) -> str:
    """The function an API integration calls ("{api.arn}" in the SAM URI, "{api.invoke_arn}" in Terraform)."""
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
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


# == Terraform ================================================================================================
class _Tf:
    """infra/*.tf parsed with python-hcl2; expressions evaluated just enough to compare them."""

    def __init__(self, directory: Path, texts: dict[str, str] | None = None) -> None:
        import hcl2
        from hcl2 import SerializationOptions

        options = SerializationOptions(strip_string_quotes=True, explicit_blocks=False, with_comments=False)
        self.resources: dict[str, dict[str, Any]] = {}
        self.data: dict[str, dict[str, Any]] = {}
        self.locals: dict[str, Any] = {}
        self.variables: dict[str, dict[str, Any]] = {}
        self.outputs: dict[str, dict[str, Any]] = {}
        self.terraform: list[dict[str, Any]] = []
        sources = texts if texts is not None else {p.name: p.read_text() for p in sorted(directory.glob("*.tf"))}
        for text in sources.values():
            parsed = hcl2.loads(text, serialization_options=options)
            for block in parsed.get("resource", []):
                for kind, named in block.items():
                    for name, body in named.items():
                        self.resources[f"{kind}.{name}"] = body
            for block in parsed.get("data", []):
                for kind, named in block.items():
                    for name, body in named.items():
                        self.data[f"data.{kind}.{name}"] = body
            for block in parsed.get("locals", []):
                self.locals.update(block)
            for block in parsed.get("variable", []):
                self.variables.update(block)
            for block in parsed.get("output", []):
                self.outputs.update(block)
            self.terraform += parsed.get("terraform", [])

    # -- expressions -------------------------------------------------------------------------------------
    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.value(item) for item in node]
        if isinstance(node, dict):
            return {key: self.value(item) for key, item in node.items()}
        if not isinstance(node, str) or "${" not in node:
            return node
        whole = re.fullmatch(r"\$\{(.*)\}", node, re.S)
        if whole and _balanced(whole.group(1)):
            return _Expression(whole.group(1), self).parse()
        return _prefix(re.sub(r"\$\{([^{}]*)\}", lambda m: str(_Expression(m.group(1), self).parse()), node))

    def reference(self, path: str) -> Any:
        parts = path.split(".")
        if parts[0] == "local":
            if parts[1] == "prefix":
                if self.locals.get("prefix") != "${var.name}-${var.stage}":
                    raise Unsupported(f"local.prefix = {self.locals.get('prefix')}")
                return "{prefix}"
            if parts[1] not in self.locals:
                raise Unsupported(f"unknown {path}")
            return self.value(self.locals[parts[1]])
        if parts[0] == "var":
            if parts[1] not in self.variables:
                raise Unsupported(f"unknown {path}")
            return "{param." + parts[1] + "}"
        if path == "aws_apigatewayv2_stage.default.invoke_url":  # the $default stage's URL is the API's
            return "{http_api.url}"
        if path == "data.aws_ssm_parameter.inspector_token.value":
            return "{param.inspector_token_parameter}"
        if parts[0] == "data":
            return "{" + ".".join(parts[1:]) + "}"
        address, attribute = ".".join(parts[:2]), parts[2] if len(parts) > 2 else None
        if address not in TF_ROLES:
            raise Unsupported(f"reference to {path}: no role in TF_ROLES")
        if address not in self.resources:
            raise Unsupported(f"reference to {path}, which infra/ does not define")
        if attribute not in _TF_ATTRIBUTE:
            raise Unsupported(f"attribute {path}")
        return "{" + TF_ROLES[address] + "." + _TF_ATTRIBUTE[attribute] + "}"

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        found = {}
        for address, body in self.resources.items():
            if address.startswith(kind + "."):
                if address not in TF_ROLES:
                    raise Unsupported(f"resource {address} has no role in TF_ROLES")
                found[TF_ROLES[address]] = body
        return found

    def resources_of(self, kind: str) -> list[dict[str, Any]]:
        return [body for address, body in self.resources.items() if address.startswith(kind + ".")]


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


class _Expression:
    """A tiny parser for the HCL expressions infra/ uses: references, numbers, strings, + and *, calls of
    jsonencode / merge / tostring, object literals."""

    _TOKEN = re.compile(r'\s*(?:(\d+)|("(?:[^"\\]|\\.)*")|([A-Za-z_][\w.\-]*(?:\[\d+\])?)|(.))', re.S)

    def __init__(self, text: str, tf: _Tf) -> None:
        self.tokens: list[tuple[str, str]] = []
        for number, string, name, other in self._TOKEN.findall(text):
            if number:
                self.tokens.append(("number", number))
            elif string:
                self.tokens.append(("string", json.loads(string)))
            elif name:
                self.tokens.append(("name", name))
            elif other.strip():
                self.tokens.append(("op", other))
        self.position = 0
        self.tf = tf
        self.text = text

    def parse(self) -> Any:
        result = self.sum()
        if self.position != len(self.tokens):
            raise Unsupported(f"expression {self.text!r}")
        return result

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, op: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (op is not None and token != ("op", op)):
            raise Unsupported(f"expression {self.text!r}: expected {op or 'more'}")
        self.position += 1
        return token

    def sum(self) -> Any:
        value = self.product()
        while self.peek() == ("op", "+"):
            self.take("+")
            value = _arithmetic(value, self.product(), lambda a, b: a + b, self.text)
        return value

    def product(self) -> Any:
        value = self.atom()
        while self.peek() == ("op", "*"):
            self.take("*")
            value = _arithmetic(value, self.atom(), lambda a, b: a * b, self.text)
        return value

    def atom(self) -> Any:
        kind, text = self.take()
        if kind == "number":
            return int(text)
        if kind == "string":
            return self.tf.value(text)
        if (kind, text) == ("op", "{"):
            return self.object()
        if kind == "name" and text in ("true", "false"):
            return text == "true"
        if kind == "name" and self.peek() == ("op", "("):
            self.take("(")
            args = [] if self.peek() == ("op", ")") else [self.sum()]
            while self.peek() == ("op", ","):
                self.take(",")
                args.append(self.sum())
            self.take(")")
            return _call(text, args, self.text)
        if kind == "name":
            return self.tf.reference(text)
        raise Unsupported(f"expression {self.text!r}")

    def object(self) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while self.peek() != ("op", "}"):
            kind, key = self.take()
            if kind not in ("name", "string"):
                raise Unsupported(f"object key in {self.text!r}")
            self.take("=")
            result[key] = self.sum()
            if self.peek() == ("op", ","):
                self.take(",")
        self.take("}")
        return result


def _arithmetic(a: Any, b: Any, op: Callable[[int, int], int], text: str) -> int:
    if not (isinstance(a, int) and isinstance(b, int)):
        raise Unsupported(f"arithmetic on {a!r} and {b!r} in {text!r}")
    return op(a, b)


def _call(name: str, args: list[Any], text: str) -> Any:
    if name == "jsonencode" and len(args) == 1:
        return args[0]  # compared as the structure it encodes
    if name == "tostring" and len(args) == 1:
        return args[0]
    if name == "merge" and all(isinstance(a, dict) for a in args):
        merged: dict[str, Any] = {}
        for arg in args:
            merged.update(arg)
        return merged
    raise Unsupported(f"function {name} in {text!r}")


def _one(blocks: Any) -> dict[str, Any]:
    """A nested block that appears once (python-hcl2 gives a list of blocks)."""
    if isinstance(blocks, dict):
        return blocks
    if not isinstance(blocks, list) or len(blocks) != 1:
        raise Unsupported(f"expected one block, got {blocks!r}")
    one: dict[str, Any] = blocks[0]
    return one


def describe_terraform(directory: Path, texts: dict[str, str] | None = None) -> Description:
    """The description of the Terraform module in `directory` (or of `texts`: file name -> content)."""
    tf = _Tf(directory, texts)
    v = tf.value
    description: Description = {"tables": {}, "queues": {}, "functions": {}, "event_sources": {}, "log_groups": {},
                                "layers": {}, "iam": {}, "parameters": {}, "http": {}, "outputs": {}}
    for role, body in tf.of_type("aws_dynamodb_table").items():
        ttl = _one(body["ttl"]) if "ttl" in body else None
        hash_key = v(body["hash_key"])
        keys = {hash_key: "HASH"}
        if "range_key" in body:
            keys[v(body["range_key"])] = "RANGE"
        description["tables"][role] = {
            "name": v(body.get("name")),
            "billing_mode": v(body.get("billing_mode", "PROVISIONED")),
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
            "point_in_time_recovery": v(_one(body["point_in_time_recovery"])["enabled"])
            if "point_in_time_recovery" in body else False,
            "deletion_protection": v(body.get("deletion_protection_enabled", False)),
        }
    for role, body in tf.of_type("aws_sqs_queue").items():
        redrive = v(body["redrive_policy"]) if "redrive_policy" in body else None
        description["queues"][role] = {
            **SQS_DEFAULTS,
            "name": v(body.get("name")),
            "fifo": v(body.get("fifo_queue", False)),
            "content_based_deduplication": v(body.get("content_based_deduplication")),
            "deduplication_scope": v(body.get("deduplication_scope")),
            "throughput_limit": v(body.get("fifo_throughput_limit")),
            "visibility_timeout": v(body.get("visibility_timeout_seconds", 30)),
            "retention": v(body.get("message_retention_seconds", 345600)),
            "redrive": None if redrive is None else {"target": redrive["deadLetterTargetArn"],
                                                     "max_receives": redrive["maxReceiveCount"]},
        }
    for role, body in tf.of_type("aws_lambda_function").items():
        description["functions"][role] = {
            "name": v(body.get("function_name")), "handler": v(body["handler"]), "runtime": v(body["runtime"]),
            "architectures": v(body.get("architectures", ["x86_64"])), "memory": v(body.get("memory_size", 128)),
            "timeout": v(body.get("timeout", 3)), "role": v(body["role"]),
            "environment": v(_one(body["environment"])["variables"]) if "environment" in body else {},
            "log_group": v(_one(body["logging_config"])["log_group"]) if "logging_config" in body else None,
            "layers": v(body.get("layers", [])),
            "snap_start": v(_one(body["snap_start"])["apply_on"]) if "snap_start" in body else "None",
        }
    for body in tf.resources_of("aws_lambda_event_source_mapping"):
        description["event_sources"][(v(body["function_name"]), v(body["event_source_arn"]))] = {
            "batch_size": v(body.get("batch_size")),
            "batching_window": v(body.get("maximum_batching_window_in_seconds")),
            "response_types": sorted(v(body.get("function_response_types", []))),
            "enabled": v(body.get("enabled", True))}
    for role, body in tf.of_type("aws_cloudwatch_log_group").items():
        description["log_groups"][role] = {"name": v(body.get("name")), "retention": v(body.get("retention_in_days"))}
    for role, body in tf.of_type("aws_lambda_layer_version").items():
        description["layers"][role] = {"runtimes": v(body.get("compatible_runtimes")),
                                       "architectures": v(body.get("compatible_architectures"))}
    documents = {address: body for address, body in tf.data.items()
                 if address.startswith("data.aws_iam_policy_document.")}
    for role, body in tf.of_type("aws_iam_role").items():
        assume = documents[_data_address(body["assume_role_policy"])]
        policies = [p for p in tf.resources_of("aws_iam_role_policy") if v(p["role"]) == "{" + role + ".id}"]
        description["iam"][role] = {
            "assumed_by": sorted(v(_one(s["principals"])["identifiers"])[0] for s in assume["statement"]),
            "statements": {_statement(v(s.get("sid")), v(s.get("effect", "Allow")), v(s["actions"]), v(s["resources"]))
                           for p in policies for s in documents[_data_address(p["policy"])]["statement"]},
            "managed_policies": sorted(v(p["policy_arn"]) for p in tf.resources_of("aws_iam_role_policy_attachment")
                                       if v(p["role"]) in ("{" + role + ".id}", "{" + role + ".name}")),
        }
    for role, _body in tf.of_type("aws_apigatewayv2_api").items():
        integrations = {address: b for address, b in tf.resources.items()
                        if address.startswith("aws_apigatewayv2_integration.")}
        routes = {}
        for route in tf.resources_of("aws_apigatewayv2_route"):
            integration = _integration_of(route["target"], integrations)
            routes[v(route["route_key"])] = {"payload": v(integration["payload_format_version"]),
                                             "target": _function_of(v(integration["integration_uri"]))}
        description["http"][role] = routes
    for stage in tf.resources_of("aws_apigatewayv2_stage"):
        description["http"]["stage"] = v(stage["name"])
    description["permissions"] = sorted((v(p["function_name"]), v(p["principal"]), v(p["action"]))
                                        for p in tf.resources_of("aws_lambda_permission"))
    for name, output in tf.outputs.items():
        description["outputs"][name] = v(output["value"])
    for name, definition in tf.variables.items():
        if name in PARAMETERS.values():
            description["parameters"][name] = definition.get("default")
    return description


def _data_address(expression: str) -> str:
    match = re.fullmatch(r"\$\{(data\.aws_iam_policy_document\.\w+)\.json\}", expression)
    if match is None:
        raise Unsupported(f"policy {expression}: expected data.aws_iam_policy_document.<name>.json")
    return match.group(1)


def _integration_of(target: str, integrations: dict[str, dict[str, Any]]) -> dict[str, Any]:
    match = re.fullmatch(r"integrations/\$\{(aws_apigatewayv2_integration\.\w+)\.id\}", target)
    if match is None or match.group(1) not in integrations:
        raise Unsupported(f"route target {target}")
    return integrations[match.group(1)]


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
