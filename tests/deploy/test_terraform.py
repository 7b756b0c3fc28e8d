"""Terraform proven offline: `terraform init` against the AWS provider found on this machine (5.100 here; the
module admits 5.100 and 6.x), `terraform validate`, `terraform apply` of infra/ to a moto server, and the
created resources read back through the AWS APIs compared with the description the parity test checks against
template.yaml and the code (tests/deploy/describe.py, code_rules.py). Then the data's protection: a stage
change that keeps the data's names replaces nothing stateful; one that would rename them is refused by
`prevent_destroy`. Last, `terraform destroy` removes everything (with the dev override that lifts
`prevent_destroy`, as docs/deploy.md describes for throwaway stacks): it runs in the background after these
tests, and the session's end fails if it failed or left anything (tests/deploy/terraform.py, close()).

A missing provider is a failure under `make check` (DORMANT_DEPLOY_TOOLS), like the other deployment tools.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

from tests.deploy.code_rules import code_mismatches
from tests.deploy.describe import describe_terraform, differences
from tests.deploy.hcl import TerraformModule
from tests.deploy.live import describe_live, resolve, tokens_of
from tests.deploy.roles import TF_ROLES
from tests.deploy.support import INFRA, REGION
from tests.deploy.terraform import APPLIED, DATA_RESOURCES, TerraformRun

ACCOUNT = "123456789012"
FIFO_DEFAULTS = {"content_based_deduplication": False, "deduplication_scope": "queue", "throughput_limit": "perQueue"}
# The first test waits for the whole background run when it runs alone (about 3 minutes on a busy machine)
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def applied(terraform_run: TerraformRun) -> Iterator[TerraformRun]:
    """The applied run; once this module's tests are done, `terraform destroy` starts in the background (the
    session's end checks it removed everything: tests/deploy/conftest.py)."""
    terraform_run.wait()
    if terraform_run.error is not None:
        raise terraform_run.error
    init = terraform_run.steps["init"]
    if init.returncode != 0:
        message = (f"terraform init found no AWS provider (no local mirror with hashicorp/aws >= 5.100, < 7 in "
                   f"{'DORMANT_TF_PLUGIN_DIR or the usual plugin directories'}; registry unreachable):\n"
                   f"{init.output[-2000:]}")
        if os.environ.get("DORMANT_DEPLOY_TOOLS"):
            pytest.fail(message)
        pytest.skip(message)
    yield terraform_run
    terraform_run.destroy_in_background()


def _client(run: TerraformRun) -> Any:
    def client(service: str) -> Any:
        return boto3.client(service, endpoint_url=run.moto.endpoint, region_name=REGION,
                            aws_access_key_id="testing", aws_secret_access_key="testing")
    return client


def test_init_uses_the_local_provider_and_validate_passes(applied: TerraformRun) -> None:
    init, validate = applied.steps["init"], applied.steps["validate"]
    if applied.mirror is not None:
        assert "-plugin-dir=" in " ".join(init.command)
    assert "hashicorp/aws" in init.output and "Terraform has been successfully initialized" in init.output
    assert validate.returncode == 0 and "The configuration is valid" in validate.output, validate.output
    assert applied.steps["apply"].returncode == 0, applied.steps["apply"].output[-4000:]


def test_apply_creates_what_the_description_says(applied: TerraformRun) -> None:
    state = applied.state()
    module = TerraformModule(INFRA, values=APPLIED)
    # every resource the module declares in this scenario exists, and nothing else
    assert {address for address in state if not address.startswith("data.")} == set(module.resources)
    assert "aws_apigatewayv2_authorizer.jwt" in state  # auth_mode = jwt
    static = describe_terraform(INFRA, values=APPLIED)
    assert code_mismatches(static, APPLIED) == []  # the description fits the code (as in test_parity)

    tokens = tokens_of(state, prefix="dormant-dev", values=module.values, region=REGION, account=ACCOUNT)
    names = {TF_ROLES[address]: attributes.get("function_name") or attributes.get("name") or attributes.get("bucket")
             for address, attributes in state.items() if address in TF_ROLES}
    names.update({"alarm:" + state[address]["alarm_name"]: TF_ROLES[address]
                  for address in state if address.startswith("aws_cloudwatch_metric_alarm.")})
    live = describe_live(_client(applied), names, state["aws_apigatewayv2_api.http"]["id"],
                         realtime=(state["aws_apigatewayv2_api.realtime"]["id"], module.values["stage"]))
    _sorted_audience(live)
    expected = _comparable(resolve(static, tokens), live)
    # the bucket's name is Terraform's own, unique (bucket names are global; value_bucket_name is not set here)
    assert expected["buckets"]["values"]["name"] == "{generated}" and names["values"].startswith("terraform-")
    expected["buckets"]["values"]["name"] = names["values"]
    assert differences(expected, live) == []
    # the comparison is not of empty shells
    assert len(live["queues"]) == 4 and len(live["alarms"]) == 3 and len(live["event_sources"]) == 2
    assert live["http"]["authorizers"]["jwt_authorizer"]["audience"] == ["aud-1", "aud-2"]
    assert set(live["websocket"]["routes"]) == {"$connect", "$disconnect", "$default"}
    # jwt: $connect's Lambda authorizer, invoking the authorizer function's alias, which only it may invoke
    assert live["websocket"]["authorizers"]["realtime_authorizer"]["function"] == "authorizer_alias"
    assert live["websocket"]["routes"]["$connect"]["authorization"] == "CUSTOM"
    assert live["functions"]["authorizer"]["handler"] == "functions.authorizer.handler.handler"
    assert live["alarms"]["worker_errors_alarm"]["actions"] == [APPLIED["alarm_topic_arn"]]
    assert live["functions"]["api"]["reserved_concurrency"] == 20
    assert live["http"]["stage"]["throttling"] == {"rate": 50, "burst": 100}
    assert live["tables"]["table"]["point_in_time_recovery"] is True
    assert len(live["buckets"]["values"]["lifecycle"]) == 2 and live["buckets"]["values"]["policy"]
    assert live["functions"]["worker"]["environment"]["DORMANT_BUCKET"] == names["values"]
    # the operator token is in SSM only: neither the environment nor Terraform's state holds it
    state_text = (applied.workdir / "terraform.tfstate").read_text()
    assert "operator-token" not in state_text
    assert live["functions"]["api"]["environment"]["DORMANT_INSPECTOR_TOKEN_PARAMETER"] == "/dormant/inspector-token"


def _comparable(expected: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """The expected description cut to the fields the live reader reads, in the APIs' types."""
    cut: dict[str, Any] = {}
    for section, parts in live.items():
        if section in ("http", "websocket"):
            cut[section] = {"routes": {k: _fields(expected[section]["routes"].get(k, {}), v)
                                       for k, v in parts["routes"].items()},
                            "authorizers": {k: _fields(_split(expected[section]["authorizers"].get(k, {})), v)
                                            for k, v in parts["authorizers"].items()},
                            "stage": expected[section]["stage"]}
        elif isinstance(parts, dict):
            cut[section] = {role: _fields(expected[section].get(role, {}), fields)
                            for role, fields in parts.items()}
        else:  # (sorted again: resolved tokens may sort otherwise than the tokens did)
            cut[section] = sorted(expected[section]) if isinstance(expected[section], list) else expected[section]
    for function in cut["functions"].values():  # environment variables are strings
        function["environment"] = {k: str(v) for k, v in function.get("environment", {}).items()}
    for queue in cut["queues"].values():  # what SQS reports for a FIFO queue's attributes left unset
        if queue.get("fifo"):
            for key, default in FIFO_DEFAULTS.items():
                queue[key] = default if queue.get(key) is None else queue[key]
    return cut


def _fields(expected: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    return {key: expected[key] for key in live if key in expected}


def _split(authorizer: dict[str, Any]) -> dict[str, Any]:
    """`split(',', a,b)` (how a description writes Fn::Split / split()) evaluated."""
    audience = authorizer.get("audience", "")
    if isinstance(audience, str) and audience.startswith("split(','"):
        authorizer = {**authorizer, "audience": audience.removeprefix("split(',', ").removesuffix(")").split(",")}
    return authorizer


def _sorted_audience(live: dict[str, Any]) -> None:
    """The provider keeps an authorizer's audiences as a set: their order is not the variable's."""
    for authorizer in live["http"]["authorizers"].values():
        authorizer["audience"] = sorted(authorizer["audience"])


def test_a_stage_change_keeps_the_data_only_under_its_old_names(applied: TerraformRun) -> None:
    kept = applied.steps["plan-stage-kept"]
    assert kept.returncode == 0, kept.output[-3000:]
    actions = applied.planned_changes("plan-stage-kept")
    assert actions, kept.output[-2000:]
    # with data_name_prefix = the old prefix, the table and queues stay (a tag changes), the rest is renamed
    assert {address: actions.get(address, "no-op") for address in DATA_RESOURCES} == \
        dict.fromkeys(DATA_RESOURCES, "update")
    assert actions["aws_lambda_function.api"] == "replace"
    # without it, Terraform refuses to plan the replacement of the table and the queues
    # (Terraform stops at the first ones it meets: the table and the dead-letter queues the others depend on)
    lost = applied.steps["plan-stage-lost"]
    assert lost.returncode != 0 and "Instance cannot be destroyed" in lost.output, lost.output[-3000:]
    for refused in ('resource "aws_dynamodb_table" "actors"', 'resource "aws_sqs_queue" "wake_dlq"',
                    'resource "aws_sqs_queue" "timers_dlq"'):
        assert refused in lost.output, lost.output[-3000:]
