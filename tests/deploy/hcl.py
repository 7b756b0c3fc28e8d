"""infra/*.tf read with python-hcl2, and its expressions evaluated just enough to compare them with template.yaml.

References become tokens (tests/deploy/describe.py): `aws_sqs_queue.wake.url` -> "{wake.url}", `var.x` ->
"{param.x}", `"${local.prefix}-..."` -> "{prefix}-...". Conditions are decided by a scenario: the variables'
values (their defaults, or those a test sets), so `count = var.auth_mode == "jwt" ? 1 : 0` and ternaries pick
what a plan with those values would. Anything this reader does not know raises Unsupported.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.deploy.roles import TF_ROLES, Unsupported, token_values

ABSENT = object()  # null: the argument is not set
# data sources that stand for the template's pseudo parameters
_PSEUDO = {"data.aws_partition.current.partition": "{AWS::Partition}",
           "data.aws_region.current.name": "{AWS::Region}",
           "data.aws_partition.current.dns_suffix": "{AWS::URLSuffix}",
           "data.aws_caller_identity.current.account_id": "{AWS::AccountId}"}
_TF_ATTRIBUTE = {"url": "url", "arn": "arn", "name": "name", "function_name": "name", "id": "id", "bucket": "name",
                 "invoke_arn": "invoke_arn", "execution_arn": "execution_arn"}


class TerraformModule:
    def __init__(self, directory: Path, texts: dict[str, str] | None = None,
                 values: dict[str, Any] | None = None) -> None:
        self.resources: dict[str, dict[str, Any]] = {}
        self.data: dict[str, dict[str, Any]] = {}
        self.locals: dict[str, Any] = {}
        self.variables: dict[str, dict[str, Any]] = {}
        self.outputs: dict[str, dict[str, Any]] = {}
        sources = texts if texts is not None else {p.name: p.read_text() for p in sorted(directory.glob("*.tf"))}
        for text in sources.values():
            parsed = _parse(text)
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
        self.values = {name: body.get("default") for name, body in self.variables.items()}
        unknown = set(values or {}) - set(self.values)
        if unknown:
            raise Unsupported(f"scenario sets unknown variables {sorted(unknown)}")
        self.values.update(values or {})
        # resources whose count is 0 in this scenario do not exist
        self.resources = {address: body for address, body in self.resources.items()
                          if "count" not in body or self.value(body["count"]) == 1}

    # -- expressions -----------------------------------------------------------------------------------------
    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [item for item in (self.value(i) for i in node) if item is not ABSENT]
        if isinstance(node, dict):
            return {key: item for key, item in ((k, self.value(v)) for k, v in node.items()) if item is not ABSENT}
        if not isinstance(node, str) or "${" not in node:
            return node
        whole = re.fullmatch(r"\$\{(.*)\}", node, re.S)
        if whole and _balanced(whole.group(1)):
            return _Expression(whole.group(1), self).parse()
        return _prefix(re.sub(r"\$\{([^{}]*)\}", lambda m: str(_Expression(m.group(1), self).parse()), node))

    def get(self, body: dict[str, Any], key: str, default: Any = None) -> Any:
        """An argument's value; `default` when it is missing or null."""
        if key not in body:
            return default
        found = self.value(body[key])
        return default if found is ABSENT else found

    def reference(self, path: str) -> Any:
        path = re.sub(r"\[\d+\]", "", path)  # aws_x.y[0].id: counted resources exist once or not at all
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
        if path in _PSEUDO:
            return _PSEUDO[path]
        if path == "aws_apigatewayv2_stage.default.invoke_url":  # the $default stage's URL is the API's
            return "{http_api.url}"
        if path == "aws_apigatewayv2_stage.realtime.invoke_url":  # wss://<id>.execute-api.<region>.../<stage>
            return "{realtime_api.url}"
        if parts[0] == "data":
            return "{" + ".".join(parts[1:]) + "}"
        address, attribute = ".".join(parts[:2]), parts[2] if len(parts) > 2 else None
        if address not in TF_ROLES:
            raise Unsupported(f"reference to {path}: no role in TF_ROLES")
        if address not in self.resources:
            raise Unsupported(f"reference to {path}, which infra/ does not define (in this scenario)")
        if attribute not in _TF_ATTRIBUTE:
            raise Unsupported(f"attribute {path}")
        return "{" + TF_ROLES[address] + "." + _TF_ATTRIBUTE[attribute] + "}"

    def concrete(self, value: Any) -> Any:
        """A token of a variable replaced by its value in this scenario (for comparisons)."""
        return token_values(value, self.values)

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


@functools.lru_cache(maxsize=64)
def _parse(text: str) -> dict[str, Any]:
    """python-hcl2's parse of one file (slow: cached; nothing here changes what it returns)."""
    import hcl2
    from hcl2 import SerializationOptions

    options = SerializationOptions(strip_string_quotes=True, explicit_blocks=False, with_comments=False)
    parsed: dict[str, Any] = hcl2.loads(text, serialization_options=options)
    return parsed


def _prefix(text: str) -> str:
    return text.replace("{AWS::StackName}-{param.stage}", "{prefix}")


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


class _Expression:
    """A small parser for the HCL expressions infra/ uses: references, numbers, strings, lists, object
    literals, + and *, ==, !=, &&, ||, ternaries, and calls of jsonencode / merge / tostring / split."""

    _TOKEN = re.compile(r'\s*(?:(\d+)|("(?:[^"\\]|\\.)*")|([A-Za-z_][\w.\-]*(?:\[\d+\][\w.]*)?)|(==|!=|&&|\|\||.))',
                        re.S)

    def __init__(self, text: str, tf: TerraformModule) -> None:
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
        self.skipping = 0
        self.tf = tf
        self.text = text

    def parse(self) -> Any:
        result = self.ternary()
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

    def ternary(self) -> Any:
        condition = self.logical()
        if self.peek() != ("op", "?"):
            return condition
        self.take("?")
        decided = True if self.skipping else self.tf.concrete(condition)
        if not isinstance(decided, bool):
            raise Unsupported(f"condition {self.text!r} is not decided by the scenario ({decided!r})")
        # the branch not taken is parsed, not evaluated (it may name a resource this scenario does not have)
        if_true = self.branch(taken=decided)
        self.take(":")
        if_false = self.branch(taken=not decided)
        return if_true if decided else if_false

    def branch(self, *, taken: bool) -> Any:
        if not taken:
            self.skipping += 1
        try:
            return self.ternary()
        finally:
            if not taken:
                self.skipping -= 1

    def logical(self) -> Any:
        value = self.comparison()
        while self.peek() in (("op", "&&"), ("op", "||")):
            op = self.take()[1]
            other = self.comparison()
            if self.skipping:
                continue
            left, right = self.tf.concrete(value), self.tf.concrete(other)
            value = (left and right) if op == "&&" else (left or right)
        return value

    def comparison(self) -> Any:
        value = self.sum()
        if self.peek() in (("op", "=="), ("op", "!=")):
            op = self.take()[1]
            other = self.sum()
            if self.skipping:
                return None
            left, right = self.tf.concrete(value), self.tf.concrete(other)
            left, right = (None if x is ABSENT else x for x in (left, right))
            return (left == right) if op == "==" else (left != right)
        return value

    def sum(self) -> Any:
        value = self.product()
        while self.peek() == ("op", "+"):
            self.take("+")
            other = self.product()
            value = None if self.skipping else _arithmetic(value, other, lambda a, b: a + b, self.text)
        return value

    def product(self) -> Any:
        value = self.atom()
        while self.peek() == ("op", "*"):
            self.take("*")
            other = self.atom()
            value = None if self.skipping else _arithmetic(value, other, lambda a, b: a * b, self.text)
        return value

    def atom(self) -> Any:
        kind, text = self.take()
        if kind == "number":
            return int(text)
        if kind == "string":
            return None if self.skipping else self.tf.value(text)
        if (kind, text) == ("op", "{"):
            return self.object()
        if (kind, text) == ("op", "["):
            items = []
            while self.peek() != ("op", "]"):
                items.append(self.ternary())
                if self.peek() == ("op", ","):
                    self.take(",")
            self.take("]")
            return items
        if (kind, text) == ("op", "("):
            inner = self.ternary()
            self.take(")")
            return inner
        if kind == "name" and text in ("true", "false"):
            return text == "true"
        if kind == "name" and text == "null":
            return ABSENT
        if kind == "name" and self.peek() == ("op", "("):
            self.take("(")
            args = [] if self.peek() == ("op", ")") else [self.ternary()]
            while self.peek() == ("op", ","):
                self.take(",")
                args.append(self.ternary())
            self.take(")")
            return None if self.skipping else _call(text, args, self.text)
        if kind == "name":
            return None if self.skipping else self.tf.reference(text)
        raise Unsupported(f"expression {self.text!r}")

    def object(self) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while self.peek() != ("op", "}"):
            kind, key = self.take()
            if kind not in ("name", "string"):
                raise Unsupported(f"object key in {self.text!r}")
            self.take("=")
            result[key] = self.ternary()
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
    if name == "split" and len(args) == 2:
        return f"split({args[0]!r}, {args[1]})"  # what template.yaml's Fn::Split becomes too
    if name == "merge" and all(isinstance(a, dict) for a in args):
        merged: dict[str, Any] = {}
        for arg in args:
            merged.update(arg)
        return merged
    raise Unsupported(f"function {name} in {text!r}")


def one_block(blocks: Any) -> dict[str, Any]:
    """A nested block that appears once (python-hcl2 gives a list of blocks)."""
    if isinstance(blocks, dict):
        return blocks
    if not isinstance(blocks, list) or len(blocks) != 1:
        raise Unsupported(f"expected one block, got {blocks!r}")
    one: dict[str, Any] = blocks[0]
    return one
