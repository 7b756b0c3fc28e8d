"""Invoke a Lambda handler of functions/ in this (fresh) interpreter, as the Lambda runtime would: import the
module (init), then call `handler(event, context)` once. Its stdout is what CloudWatch Logs would receive.

    python -m tests.integration.lambda_invoke worker QUEUE_URL...   # receive a batch per queue and handle it
    python -m tests.integration.lambda_invoke api EVENT_JSON...     # API Gateway events, one invocation each
"""

from __future__ import annotations

import json
import sys
import uuid
from dataclasses import dataclass, field


@dataclass
class Context:
    function_name: str = "dormant-test"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:dormant-test"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def main() -> None:
    kind, *arguments = sys.argv[1:]
    if kind == "api":
        from functions.api.handler import handler as api_handler

        for n, event in enumerate(arguments, 1):
            response = api_handler(json.loads(event), Context(aws_request_id=f"api-request-{n}"))
            print(json.dumps({"test_response": response}), file=sys.stderr)
        return
    import boto3

    from dormant.sqs.poller import lambda_event, queue_arn
    from functions.worker.handler import handler as worker_handler

    sqs = boto3.client("sqs")
    for url in arguments:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2,
                                       MessageSystemAttributeNames=["All"]).get("Messages", [])
        if not messages:
            continue
        event = lambda_event(messages, arn=queue_arn(url, "us-east-1"), region="us-east-1")
        response = worker_handler(event, Context(aws_request_id=f"worker-{uuid.uuid4().hex[:8]}"))
        print(json.dumps({"test_response": response}), file=sys.stderr)


if __name__ == "__main__":
    main()
