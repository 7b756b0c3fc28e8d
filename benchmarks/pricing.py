"""Bills from counted usage: every item AWS charges for, at the prices of benchmarks/prices.py.

`Usage` is what a scenario used (measured by benchmarks/requests.py, or the floor a scenario's requests cannot
go below); `bill(usage, deploy)` prices it line by line. `DurableFunctions` and `StepFunctions` price the same
workflow on those services from the counts their billing rules name (docs/performance.md, "The same workflows
elsewhere", says which rules and where they are uncertain).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from benchmarks import prices
from benchmarks.prices import Deployment

GB = 1024**3
TIMER_BATCH_MAX = 10  # the timer event source's batch size (template.yaml): a batch of 10 ends its window full
LINES = ("API Gateway", "Lambda requests", "Lambda duration", "DynamoDB writes", "DynamoDB index writes",
         "DynamoDB reads", "SQS FIFO", "SQS standard", "CloudWatch Logs", "S3", "data out")


@dataclass
class Usage:
    """Billed quantities of one scenario, in total (`per(n)` divides them by its units of work)."""

    write_units: float = 0.0  # DynamoDB, the table's
    index_write_units: float = 0.0  # DynamoDB, its secondary indexes'
    read_units: float = 0.0  # DynamoDB, indexes included
    sqs_fifo: float = 0.0  # billed SQS requests (64 KB chunks) on FIFO queues
    sqs_standard: float = 0.0
    gateway_requests: float = 0.0  # API Gateway HTTP API, metered in 512 KB increments
    gateway_bytes_out: float = 0.0  # responses to callers (data transfer out, if they are outside AWS)
    api_invocations: float = 0.0
    api_ms: float = 0.0  # billed milliseconds, summed
    worker_invocations: float = 0.0
    worker_ms: float = 0.0
    log_bytes: float = 0.0  # CloudWatch Logs ingested: the functions' lines, Lambda's own, API access logs
    function_cpu_ms: float = 0.0  # CPU the functions used (for the CPU-share reading of the duration)
    # Payloads offloaded to S3 (issue 19): zero until offload lands; benchmarks/requests.py fills these from the
    # meter's S3 counts once the store makes S3 requests (PUT per offloaded value, GET per read of one).
    s3_puts: float = 0.0
    s3_gets: float = 0.0
    s3_gb_months: float = 0.0

    def per(self, units: float) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) / units for f in fields(self)})

    def plus(self, other: Usage) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    @property
    def invocations(self) -> float:
        return self.api_invocations + self.worker_invocations

    @property
    def billed_ms(self) -> float:
        return self.api_ms + self.worker_ms

    def at_cpu_share(self, deploy: Deployment) -> Usage:
        """The same usage with its CPU time run at the function's vCPU share (512 MB: 0.29 of a vCPU), the rest of
        the wall time (waiting on DynamoDB and SQS) unchanged: the duration a slower CPU would bill."""
        stretch = 1 / deploy.cpu_share - 1
        total = self.billed_ms or 1.0
        extra = self.function_cpu_ms * stretch
        return replace(self, api_ms=self.api_ms + extra * self.api_ms / total,
                       worker_ms=self.worker_ms + extra * self.worker_ms / total)


def bill(usage: Usage, deploy: Deployment) -> dict[str, float]:
    """USD by line (LINES) for `usage`."""
    return {
        "API Gateway": usage.gateway_requests * prices.HTTP_API_REQUEST,
        "Lambda requests": usage.invocations * prices.LAMBDA_REQUEST,
        "Lambda duration": usage.billed_ms * deploy.per_ms,
        "DynamoDB writes": usage.write_units * prices.DYNAMODB_WRITE_UNIT,
        "DynamoDB index writes": usage.index_write_units * prices.DYNAMODB_WRITE_UNIT,
        "DynamoDB reads": usage.read_units * prices.DYNAMODB_READ_UNIT,
        "SQS FIFO": usage.sqs_fifo * prices.SQS_FIFO_REQUEST,
        "SQS standard": usage.sqs_standard * prices.SQS_STANDARD_REQUEST,
        "CloudWatch Logs": usage.log_bytes / GB * prices.LOGS_INGESTED_GB,
        "S3": (usage.s3_puts * prices.S3_PUT + usage.s3_gets * prices.S3_GET
               + usage.s3_gb_months * prices.S3_STORAGE_GB_MONTH),
        "data out": usage.gateway_bytes_out / GB * prices.DATA_TRANSFER_OUT_GB,
    }


def total(usage: Usage, deploy: Deployment) -> float:
    return sum(bill(usage, deploy).values())


@dataclass(frozen=True)
class Floor:
    """The requests a unit of work cannot do without on this architecture, per unit: the HTTP request that brings
    each message in (API Gateway, one API invocation), the message's one inbox write and one SQS send of its
    wake-up, per event-source batch one receive, one delete and one worker invocation, one read of the actor per
    wake-up, one commit per step (a step's result is durable before the next step starts), and the timers the
    workflow asks for (a send each, and per timer batch a receive, a delete and an invocation; a read of the actor
    each). Every invocation at the least Lambda bills (1 ms); no logs, no secondary indexes, no polling.

    The event sources are the deployment's, in the floor as in the measured column: a receive that returns nothing
    while the source waits for a batch is its polling (a fixed cost per queue, 20 s long polls: in neither), and a
    timer batch that its batching window (template.yaml: 1 s) does not fill ends with one more receive, which
    returns nothing and is billed for that batch (in both: `timer_window`)."""

    requests: float  # HTTP requests per unit (messages, creations, calls)
    inbox_writes: float
    sends: float  # FIFO wake-up messages per unit
    deliveries: float  # FIFO event-source batches per unit
    loads: float  # wake-ups per unit (each reads the actor once)
    commits: float
    timers: float = 0.0  # timer wake-ups per unit
    timer_batch: float = 1.0  # timers per timer event-source batch
    messages: float | None = None  # inbox messages among the inbox writes (None: all; a creation is not one)
    timer_window: bool = True  # timer batches gather for a window, and end it unfilled (the receive that closes it)

    def usage(self) -> Usage:
        timer_deliveries = self.timers / self.timer_batch
        invocations = self.deliveries + timer_deliveries
        closing = timer_deliveries if self.timer_window and self.timer_batch < TIMER_BATCH_MAX else 0.0
        return Usage(write_units=self.inbox_writes + self.commits, read_units=self.loads + self.timers,
                     sqs_fifo=self.sends + 2 * self.deliveries,
                     sqs_standard=self.timers + 2 * timer_deliveries + closing,
                     gateway_requests=self.requests, api_invocations=self.requests, api_ms=self.requests,
                     worker_invocations=invocations, worker_ms=invocations)

    def guaranteed_usage(self) -> Usage:
        """The floor of this design's dedupe and ordering rules (docs/storage.md, "Why the inbox keeps its `pending`
        index"): with single-item conditional writes, a message that is deduplicated by its id for a window after
        its consumption and read in send order costs one more table write (the tombstone that records its
        consumption) and two ordered-entry writes (the index entry written with it and removed by the tombstone,
        or an ordered item's put and delete: the same units)."""
        messages = self.inbox_writes if self.messages is None else self.messages
        base = self.usage()
        return base.plus(Usage(write_units=messages, index_write_units=2 * messages))


@dataclass(frozen=True)
class DurableFunctions:
    """The workflow on AWS Lambda durable functions, per unit of work: durable operations (two readings where
    the rule is uncertain: `operations` the fewest the workflow can be written with, `operations_high` the
    SDK's metering as documented for the helper a user would reach for) and invocations (a start, and a resume
    after every wait or callback, each replaying the execution)."""

    operations: float
    operations_high: float
    invocations: float

    def price(self, deploy: Deployment, *, high: bool, ms_per_invocation: float, bytes_written: float) -> float:
        operations = self.operations_high if high else self.operations
        return (operations * prices.DURABLE_OPERATION + self.invocations * prices.LAMBDA_REQUEST
                + self.invocations * ms_per_invocation * deploy.per_ms
                + bytes_written / GB * (prices.DURABLE_DATA_WRITTEN_GB
                                        + prices.DURABLE_DATA_RETAINED_GB_MONTH * 14 / 30))


@dataclass(frozen=True)
class StepFunctions:
    """The workflow as a Step Functions Standard state machine, per unit of work: state transitions, and the
    Lambda tasks among them (steps that run code: one Lambda invocation each, at 1 ms in the low reading)."""

    transitions: float
    lambda_tasks: float

    def price(self, deploy: Deployment, *, with_lambda: bool) -> float:
        tasks = self.lambda_tasks * (prices.LAMBDA_REQUEST + deploy.per_ms) if with_lambda else 0.0
        return self.transitions * prices.STEP_FUNCTIONS_TRANSITION + tasks
