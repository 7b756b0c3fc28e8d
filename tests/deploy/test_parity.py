"""template.yaml and infra/ describe the same deployment, and that deployment is the one the code needs.

Both are reduced to one description (tests/deploy/describe.py): table keys, indexes and TTL, queue attributes
and redrive, function settings and environment, event sources, IAM statements, log groups, the layer, the HTTP
API and the parameters' defaults. The code's own definitions are the reference (tests/deploy/code_rules.py).
Broken copies of each file prove the comparison can fail.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.code_rules import code_mismatches
from tests.deploy.describe import Description, Unsupported, describe_sam, describe_terraform, differences
from tests.deploy.support import INFRA, TEMPLATE, load_template, translate


def test_sam_and_terraform_describe_the_same_deployment(sam_description: Description,
                                                        terraform_description: Description) -> None:
    assert differences(sam_description, terraform_description) == []
    # the comparison covers every part of the deployment, not an empty shell
    assert set(sam_description["queues"]) == {"wake", "timers", "wake_dlq", "timers_dlq"}
    assert set(sam_description["functions"]) == {"worker", "api"}
    assert len(sam_description["event_sources"]) == 2
    assert {len(role["statements"]) for role in sam_description["iam"].values()} == {3, 4}
    assert {"api_url", "table_name", "wake_queue_url", "timer_queue_url"} <= set(sam_description["outputs"])


@pytest.mark.parametrize("side", ["sam", "terraform"])
def test_each_deployment_fits_the_code(side: str, sam_description: Description,
                                       terraform_description: Description) -> None:
    description = sam_description if side == "sam" else terraform_description
    assert code_mismatches(description) == []
    assert description["tables"]["table"]["keys"] == {"pk": "HASH", "sk": "RANGE"}


def _terraform_with(old: str, new: str) -> Description:
    texts = {path.name: path.read_text() for path in INFRA.glob("*.tf")}
    assert old in texts["main.tf"], f"the broken copy needs {old!r} in infra/main.tf"
    texts["main.tf"] = texts["main.tf"].replace(old, new, 1)
    return describe_terraform(INFRA, texts)


@pytest.mark.parametrize(("old", "new", "where", "code_rule"), [
    ('range_key                   = "sk"', 'range_key                   = "sort"', "tables.table.keys",
     "table keys"),
    ('"dynamodb:PutItem", "dynamodb:Query"]', '"dynamodb:PutItem"]', "iam.",
     "api_role grants"),
    ("batch_size              = 10", "batch_size              = 20", "event_sources",
     "a FIFO queue takes no batching window and at most 10 messages"),
    ("maxReceiveCount     = var.max_receives\n  })\n  tags = local.tags\n}\n\nresource \"aws_sqs_queue\" \"timers\"",
     "maxReceiveCount     = 3\n  })\n  tags = local.tags\n}\n\nresource \"aws_sqs_queue\" \"timers\"",
     "queues.wake.redrive.max_receives", "queue wake redrive"),
], ids=["table-key", "iam-action", "batch-size", "redrive"])
def test_a_mismatched_terraform_copy_is_caught(old: str, new: str, where: str, code_rule: str,
                                               sam_description: Description) -> None:
    broken = _terraform_with(old, new)
    found = differences(sam_description, broken)
    assert found and all(line.startswith(where) for line in found), found
    assert any(code_rule in problem for problem in code_mismatches(broken))


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
], ids=["visibility", "env", "ttl", "iam-wildcard", "queue-attributes"])
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
