"""One settings object for the AWS runtime, read from `DORMANT_*` environment variables.

The same code runs on AWS, a moto server, LocalStack or any compatible endpoint: only these values change.
`endpoint_url` falls back to `AWS_ENDPOINT_URL` and `region` to `AWS_REGION` / `AWS_DEFAULT_REGION`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dormant.core.dedupe import DEDUPE_WINDOW
from dormant.core.limits import check_bucket_name, check_queue_name, check_table_name


class Settings(BaseSettings):
    """Configuration of the DynamoDB store, the SQS transport, the worker and the API.

    Build it with `Settings()` (environment) or `Settings(table="my-table", endpoint_url=...)` (tests). Names the
    services would refuse (a table name under 3 characters, a queue name with a space, a FIFO queue without
    `.fifo`) fail here, naming the setting (dormant.core.limits), not later at CreateTable.
    """

    model_config = SettingsConfigDict(env_prefix="DORMANT_", extra="ignore", populate_by_name=True)

    # -- where ---------------------------------------------------------------------------------------
    region: str = Field("us-east-1", validation_alias=AliasChoices(
        "DORMANT_REGION", "AWS_REGION", "AWS_DEFAULT_REGION", "region"))
    endpoint_url: str | None = Field(None, validation_alias=AliasChoices(
        "DORMANT_ENDPOINT_URL", "AWS_ENDPOINT_URL", "endpoint_url"))
    dynamodb_endpoint_url: str | None = Field(None, validation_alias=AliasChoices(
        "DORMANT_DYNAMODB_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "dynamodb_endpoint_url"))
    """DynamoDB's own endpoint, when it differs from `endpoint_url` (e.g. dynalite beside a moto SQS)."""
    sqs_endpoint_url: str | None = Field(None, validation_alias=AliasChoices(
        "DORMANT_SQS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "sqs_endpoint_url"))
    """SQS's own endpoint, when it differs from `endpoint_url`."""

    aws_clients: Literal["aiobotocore", "threads"] = "aiobotocore"
    """How the AWS clients are made (DORMANT_AWS_CLIENTS, dormant.core.clients): `aiobotocore` (native asyncio)
    or `threads` (botocore's clients with each call in a pool thread; the Lambda functions' choice: no aiohttp
    to import at a cold start)."""

    # -- DynamoDB ------------------------------------------------------------------------------------
    table: str = "dormant"
    """Table name (DORMANT_TABLE)."""
    snapshot_every: int = Field(16, ge=2, le=256)
    """Commit slots per new actor: a commit carries a full snapshot once the last one is this many
    versions back, and a load reads this many commit items (docs/storage.md)."""
    dedupe_ttl_seconds: int = Field(DEDUPE_WINDOW, ge=60)
    """How long a consumed message id stays a duplicate after the commit that consumed it (a re-sent id is ignored
    in this window, and a new message after it: dormant.core.dedupe)."""
    response_ttl_seconds: int = Field(24 * 3600, ge=60)
    """How long responses of completable messages stay readable."""
    event_ttl_seconds: int = Field(24 * 3600, ge=60)
    """How long broadcast events stay readable."""

    # -- S3: values too big for the log (docs/limits.md, docs/storage.md "Large values") ----------------------
    bucket: str | None = None
    """S3 bucket for stored values over `offload_threshold_bytes` (DORMANT_BUCKET): the log and the items keep a
    reference. None: nothing is offloaded, and every value must fit DynamoDB's items (docs/limits.md)."""
    offload_threshold_bytes: int = Field(32 * 1024, ge=1024, le=100 * 1024)
    """A stored value whose JSON is larger than this goes to S3 (DORMANT_OFFLOAD_THRESHOLD_BYTES)."""
    blob_sweep_every: int = Field(256, ge=1)
    """Every this many versions of an actor that has values in S3, its commit also sweeps the actor's objects that
    nothing references any more (orphans of lost races and crashed wake-ups)."""
    blob_orphan_grace_seconds: int = Field(15 * 24 * 3600, ge=0)
    """An unreferenced object younger than this is never swept: a send's wake-up may still carry a reference to it
    (SQS keeps messages 14 days)."""
    s3_endpoint_url: str | None = Field(None, validation_alias=AliasChoices(
        "DORMANT_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "s3_endpoint_url"))
    """S3's own endpoint, when it differs from `endpoint_url`."""

    # -- SQS -----------------------------------------------------------------------------------------
    queue_name: str = "dormant-messages.fifo"
    """FIFO queue for wake-ups of client and cross-actor sends (DORMANT_QUEUE_NAME)."""
    queue_url: str | None = None
    """Its URL (DORMANT_QUEUE_URL); resolved from the name when unset."""
    timer_queue_name: str = "dormant-timers"
    """Standard queue for delayed wake-ups: timers, retries, scheduled actions."""
    timer_queue_url: str | None = None
    dlq_name: str = "dormant-dlq"
    """Dead-letter queue for poison messages."""
    dlq_url: str | None = None
    fifo_dlq_name: str = "dormant-dlq.fifo"
    """Dead-letter queue of the FIFO queue (SQS requires a FIFO queue's DLQ to be FIFO too)."""
    fifo_dlq_url: str | None = None
    max_receives: int = Field(5, ge=1)
    """Receives of a wake-up message: on the last one, a wake-up that fails by the actor's own error is moved
    to the DLQ by the worker, with the reason as attributes (the redrive policy's maxReceiveCount is the same
    number, SQS's backstop for workers that crash)."""
    wake_retry_base: float = Field(5.0, ge=0)
    """Seconds before a failed wake-up's messages come back after their first receive; doubles per receive."""
    wake_retry_max: float = Field(300.0, ge=0)
    """Longest delay before a failed wake-up's messages come back."""
    worker_reserve_seconds: float = Field(5.0, ge=0)
    """The worker starts no new wake-up once its invocation has less time left than this (the messages go
    back to the queue at once)."""
    timer_hop_max_delay: int = Field(900, ge=0, le=900)
    """Longest single SQS delay in seconds (SQS caps it at 900); longer sleeps hop."""
    inline_wait: float | None = Field(None, ge=0, le=60)
    """Longest wait (a sleep, a queue wait's timeout, a race timer) a wake-up makes in process with nothing else
    running, in seconds (DORMANT_INLINE_WAIT); a longer one suspends the actor and a timer wakes it. None: the
    wait that costs what a suspension does at the function's memory (0.52 s at 512 MB: docs/performance.md "The
    in-process wait"). Higher: short sleeps end on time instead of 1-2 s late, and the worker bills the wait."""
    function_memory_mb: int | None = Field(None, ge=128, le=10240, validation_alias=AliasChoices(
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "function_memory_mb"))
    """The function's memory as Lambda sets it (AWS_LAMBDA_FUNCTION_MEMORY_SIZE), for the default `inline_wait`."""

    # -- worker and API ------------------------------------------------------------------------------
    app: str | None = None
    """The registry as `module:attribute` (DORMANT_APP)."""
    inspector_token: SecretStr | None = None
    """Bearer token for the inspector and history routes (DORMANT_INSPECTOR_TOKEN): for dev and tests. Deployed,
    the API reads it at run time from `inspector_token_parameter` or `inspector_token_secret` instead."""
    inspector_token_parameter: str | None = None
    """Name of the SSM SecureString parameter holding the operator token (DORMANT_INSPECTOR_TOKEN_PARAMETER)."""
    inspector_token_secret: str | None = None
    """Secrets Manager secret (name or ARN) holding the operator token (DORMANT_INSPECTOR_TOKEN_SECRET)."""
    secret_cache_seconds: float = Field(300.0, ge=0)
    """How long a container keeps a token read from SSM or Secrets Manager before reading it again (rotation
    reaches every container within this time)."""

    # -- authentication ------------------------------------------------------------------------------
    auth_mode: Literal["iam", "jwt", "none"] = "iam"
    """Who may call the actor routes (DORMANT_AUTH_MODE, set by template.yaml / infra/): `iam` (API Gateway
    checked a SigV4 signature), `jwt` (API Gateway's JWT authorizer checked a bearer token), `none` (anyone:
    demos). With iam/jwt the app reads the verified identity from the request context; none there is 401."""
    jwt_issuer: str | None = None
    """The JWT issuer the API trusts (DORMANT_JWT_ISSUER); checked again on the claims when set."""
    jwt_audience: str | None = None
    """Comma-separated audiences (DORMANT_JWT_AUDIENCE); a token's `aud` or `client_id` must name one."""
    api_max_waits_per_caller: int = Field(4, ge=1)
    """Long requests (send with wait=true, events with wait>0) one caller may hold open at once in one API
    process (DORMANT_API_MAX_WAITS_PER_CALLER); more get 429. On Lambda each container serves one request
    at a time: there the API's reserved concurrency bounds them."""
    dev: bool = False
    """Dev mode (DORMANT_DEV): inspector routes need no token."""
    public_url: str | None = None
    """Where the HTTP API is reached from outside (DORMANT_PUBLIC_URL, e.g. https://api.example.com): the base of
    callback URLs (`cb.url` = <public_url>/callbacks/<token>). template.yaml and infra/ set it on the worker to the
    API's own URL (or their PublicUrl parameter); `dormant dev` to its own. Unset: `cb.url` raises CallbackUrlError
    (`cb.token` always works)."""
    realtime_url: str | None = None
    """The WebSocket API's connection-management endpoint (DORMANT_REALTIME_URL, e.g.
    https://<api id>.execute-api.<region>.amazonaws.com/<stage>; `dormant dev`: its own URL): the worker posts
    committed events to subscribed connections there (docs/realtime.md). Unset: nothing is pushed."""
    max_body_bytes: int = Field(5 * 1024 * 1024, ge=1)
    """Largest request body the HTTP API accepts (DORMANT_MAX_BODY_BYTES); larger ones get 413."""
    max_response_bytes: int | None = Field(None, ge=1024)
    """Largest response body the API answers directly (DORMANT_MAX_RESPONSE_BYTES); a larger one is handed out
    through S3 with a 303 to a presigned URL (dormant.http.large_responses). The API function sets Lambda's 6 MB;
    None (uvicorn, `dormant dev`): no limit."""
    api_max_wait: float = Field(25.0, gt=0)
    """Longest the HTTP API holds a request for `send(wait=True)` or an events long-poll
    (DORMANT_API_MAX_WAIT); API Gateway cuts requests at 30 s."""

    # -- logs (docs/observability.md "Logs"; what each setting costs: docs/performance.md "Logs, setting by setting") --
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] | None = None
    """Level of the `dormant` loggers in the Lambda functions (DORMANT_LOG_LEVEL; `warn` and lower case accepted).
    INFO: one line per wake-up and per logged request; DEBUG adds each wake-up's detail; WARNING: failures only.
    None: powertools' level (POWERTOOLS_LOG_LEVEL, or Lambda's AWS_LAMBDA_LOG_LEVEL), INFO by default."""
    log_debug_sample: float = Field(0.0, ge=0, le=1)
    """Share of invocations logged at DEBUG whatever the level (DORMANT_LOG_DEBUG_SAMPLE, 0 to 1; powertools'
    Logger `sampling_rate`, decided per invocation)."""
    request_log_sample: float | None = Field(None, ge=0, le=1)
    """Share of successful requests the API logs a line for (DORMANT_REQUEST_LOG_SAMPLE, 0 to 1); a request that
    answered 4xx/5xx or took `request_log_slow_ms` or more is always logged. None: every request, except in the API
    function behind API Gateway, whose stage's access log already records each one: there only those."""
    request_log_slow_ms: float = Field(1000.0, gt=0)
    """A request that took at least this long is always logged (DORMANT_REQUEST_LOG_SLOW_MS)."""

    @field_validator("log_level", mode="before")
    @classmethod
    def _check_log_level(cls, level: object) -> object:
        if level is None or level == "":
            return None
        if not isinstance(level, str):
            return level  # refused by the type, with pydantic's message
        name = level.strip().upper()
        name = "WARNING" if name == "WARN" else name
        if name not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError(f"log_level (DORMANT_LOG_LEVEL) must be DEBUG, INFO, WARNING or ERROR, not {level!r}")
        return name

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, url: str | None) -> str | None:
        if not url:
            return None
        if not url.startswith(("https://", "http://")) or any(ch.isspace() for ch in url) or "?" in url \
                or "#" in url:
            raise ValueError("public_url (DORMANT_PUBLIC_URL) must be an http(s) URL without spaces, query or "
                             "fragment, e.g. https://api.example.com")
        return url.rstrip("/")

    @field_validator("table")
    @classmethod
    def _check_table(cls, name: str) -> str:
        return check_table_name(name, "table (DORMANT_TABLE)")

    @field_validator("bucket")
    @classmethod
    def _check_bucket(cls, name: str | None) -> str | None:
        return None if name is None else check_bucket_name(name, "bucket (DORMANT_BUCKET)")

    @field_validator("queue_name", "fifo_dlq_name")
    @classmethod
    def _check_fifo_queue(cls, name: str, info: ValidationInfo) -> str:
        return check_queue_name(name, f"{info.field_name} (DORMANT_{str(info.field_name).upper()})", fifo=True)

    @field_validator("timer_queue_name", "dlq_name")
    @classmethod
    def _check_standard_queue(cls, name: str, info: ValidationInfo) -> str:
        return check_queue_name(name, f"{info.field_name} (DORMANT_{str(info.field_name).upper()})", fifo=False)

    def jwt_audiences(self) -> set[str]:
        return {part.strip() for part in (self.jwt_audience or "").split(",") if part.strip()}

    def client_kwargs(self, service: str | None = None) -> dict[str, Any]:
        """Keyword arguments for `session.create_client(service, **kwargs)`; naming the service ("dynamodb",
        "sqs") applies its own endpoint if one is set."""
        kwargs: dict[str, Any] = {"region_name": self.region}
        own = {"dynamodb": self.dynamodb_endpoint_url, "sqs": self.sqs_endpoint_url,
               "s3": self.s3_endpoint_url}.get(service or "")
        if own or self.endpoint_url:
            kwargs["endpoint_url"] = own or self.endpoint_url
        return kwargs
