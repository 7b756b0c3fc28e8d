"""AWS list prices the benchmarks and docs/performance.md use: one place, each with its source.

us-east-1, on-demand, no free tier, no savings plans, USD. Read 2026-12-02 from the public pricing pages
named beside each price (and, where a page renders its tables client-side, from AWS's documentation and
worked examples quoted on it). A price that changes is changed here, and every table follows.

The deployment's own settings that a price depends on (Lambda memory and architecture, the event source's
batch sizes and windows) are read from template.yaml and checked against infra/ by `deployment()`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MILLION = 1_000_000

# -- DynamoDB on-demand (https://aws.amazon.com/dynamodb/pricing/on-demand/, Standard table class) ---------------
DYNAMODB_WRITE_UNIT = 0.625 / MILLION
"""Per write request unit: one per started 1 KB written, twice for transactions; an index write costs one more
(two when the index key changes): docs.aws.amazon.com/amazondynamodb/latest/developerguide/LSI.html, GSI.html."""
DYNAMODB_READ_UNIT = 0.125 / MILLION
"""Per read request unit: one strongly consistent read of up to 4 KB (two eventually consistent ones); a read
that finds nothing still costs the minimum."""
DYNAMODB_STORAGE_GB_MONTH = 0.25
"""Per GB-month of table data (items plus 100 bytes of overhead each; local secondary indexes count too)."""
DYNAMODB_PITR_GB_MONTH = 0.20
"""Continuous backups (point-in-time recovery, on in template.yaml), per GB-month of table size."""

# -- SQS (https://aws.amazon.com/sqs/pricing/) -------------------------------------------------------------------
SQS_STANDARD_REQUEST = 0.40 / MILLION
SQS_FIFO_REQUEST = 0.50 / MILLION
"""Per request; every started 64 KB of a request's payload is billed as one request, and a batch of up to 10
messages is one request (dormant.aws.metering counts them that way). In-region data transfer is free."""

# -- API Gateway HTTP API (https://aws.amazon.com/api-gateway/pricing/) ------------------------------------------
HTTP_API_REQUEST = 1.00 / MILLION
"""Per request, the first 300 million a month ($0.90 per million after); metered in 512 KB increments."""
HTTP_API_METERING_BYTES = 512 * 1024
DATA_TRANSFER_OUT_GB = 0.09
"""Per GB sent to the internet (API Gateway's responses to callers outside AWS; the first 100 GB a month are
free across services)."""

# -- Lambda (https://aws.amazon.com/lambda/pricing/) -------------------------------------------------------------
LAMBDA_REQUEST = 0.20 / MILLION
"""Per invocation: an API Gateway request, an SQS batch from an event source mapping."""
LAMBDA_ARM_GB_SECOND = 0.0000133334
"""Per GB-second on arm64 (Graviton2), the first 7.5 billion GB-seconds a month; duration is billed per 1 ms,
rounded up, and since 2025-08-01 includes the INIT phase of a cold start."""
LAMBDA_X86_GB_SECOND = 0.0000166667
LAMBDA_VCPU_MB = 1769
"""Lambda gives a function the equivalent of one vCPU at 1,769 MB, and a proportional share below
(docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html)."""

# -- CloudWatch Logs (https://aws.amazon.com/cloudwatch/pricing/) ------------------------------------------------
LOGS_INGESTED_GB = 0.50
"""Per GB ingested (Standard class; Lambda's logs are vended logs, $0.50 per GB for the first 10 TB)."""
LOGS_STORED_GB_MONTH = 0.03
LAMBDA_PLATFORM_LOG_BYTES = 280
"""Lambda's own START, END and REPORT lines per invocation (text format), about this long."""
LAMBDA_PLATFORM_LOG_BYTES_BY_CONFIG = {"Text": LAMBDA_PLATFORM_LOG_BYTES, "JSON INFO": 230, "JSON WARN": 0}
"""The same by the functions' LoggingConfig (benchmarks/functions.py, `platform_logging`): the text format writes
START, END and REPORT; the JSON format at SystemLogLevel INFO only `platform.report` (DEBUG: start and end), about
230 bytes as AWS's example of it (docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-logformat.html);
at WARN none for an invocation that succeeds
(docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html)."""

# -- S3 Standard (https://aws.amazon.com/s3/pricing/): offloaded payloads (issue 19) ------------------------------
S3_PUT = 0.005 / 1000
"""Per PUT, COPY, POST or LIST request."""
S3_GET = 0.0004 / 1000
"""Per GET (and every other read request)."""
S3_STORAGE_GB_MONTH = 0.023
"""Per GB-month, the first 50 TB."""

# -- what the same workflows would cost elsewhere -----------------------------------------------------------------
DURABLE_OPERATION = 8.00 / MILLION
"""AWS Lambda durable functions (https://aws.amazon.com/lambda/pricing/, "Durable functions"): per durable
operation (starting an execution, a step, a wait, a callback, a chained invoke, a child context; a step's
retry is one more), plus the function's ordinary Lambda requests and duration for every invocation."""
DURABLE_DATA_WRITTEN_GB = 0.25
"""Per GB of checkpoint data written."""
DURABLE_DATA_RETAINED_GB_MONTH = 0.15
"""Per GB-month of execution state and history retained."""
STEP_FUNCTIONS_TRANSITION = 0.025 / 1000
"""Step Functions Standard workflows (https://aws.amazon.com/step-functions/pricing/): per state transition
($25 per million), retries included."""


@dataclass(frozen=True)
class Deployment:
    """What template.yaml (and infra/, which must agree) configures that the bill depends on."""

    memory_mb: int
    architecture: str
    wake_batch_size: int
    timer_batch_size: int
    timer_batching_window: int

    @property
    def gb_second(self) -> float:
        return LAMBDA_ARM_GB_SECOND if self.architecture == "arm64" else LAMBDA_X86_GB_SECOND

    @property
    def per_ms(self) -> float:
        """USD per billed millisecond of one function at this memory."""
        return self.memory_mb / 1024 * self.gb_second / 1000

    @property
    def cpu_share(self) -> float:
        """Fraction of a vCPU the function gets (1.0 from 1,769 MB)."""
        return min(1.0, self.memory_mb / LAMBDA_VCPU_MB)


def deployment(root: Path = ROOT) -> Deployment:
    """Lambda memory, architecture and event-source batching from template.yaml, checked against infra/main.tf."""
    template = (root / "template.yaml").read_text()
    infra = (root / "infra" / "main.tf").read_text()

    def one(pattern: str, text: str, what: str) -> str:
        found = re.findall(pattern, text)
        if len(set(found)) != 1:
            raise ValueError(f"{what}: expected one value in the deployment files, found {found or 'none'}")
        return str(found[0])

    memory = int(one(r"\n    MemorySize: (\d+)", template, "template.yaml MemorySize"))
    architecture = one(r"Architectures: \[(\w+)\]", template, "template.yaml Architectures")
    batch_sizes = [int(size) for size in re.findall(r"BatchSize: (\d+)", template)]
    window = int(one(r"MaximumBatchingWindowInSeconds: (\d+)", template, "template.yaml batching window"))
    if len(batch_sizes) != 2:
        raise ValueError(f"template.yaml: expected two SQS event sources, found batch sizes {batch_sizes}")
    infra_memory = {int(m) for m in re.findall(r"memory_size\s*=\s*(\d+)", infra)}
    infra_batches = [int(b) for b in re.findall(r"\bbatch_size\s*=\s*(\d+)", infra)]
    infra_window = one(r"timer_batching_window\s*=\s*(\d+)", infra, "infra timer_batching_window")
    infra_architecture = one(r'architecture\s*=\s*"(\w+)"', infra, "infra architecture")
    if (infra_memory != {memory} or infra_batches != batch_sizes or int(infra_window) != window
            or infra_architecture != architecture):
        raise ValueError(f"template.yaml and infra/ disagree: memory {memory} / {infra_memory}, batch sizes "
                         f"{batch_sizes} / {infra_batches}, window {window} / {infra_window}, architecture "
                         f"{architecture} / {infra_architecture}")
    return Deployment(memory_mb=memory, architecture=architecture, wake_batch_size=batch_sizes[0],
                      timer_batch_size=batch_sizes[1], timer_batching_window=window)
